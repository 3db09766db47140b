"""`kbroker configs`: kafka-configs.sh's --add-config syntax."""

import pytest

from kbroker.admin.client import AdminError
from kbroker.admin.configs_cmd import parse_add_config


def test_add_config_splits_on_commas_outside_brackets():
    assert parse_add_config("log.retention.ms=1000,log.cleanup.policy=[delete,compact], max.connections = 5") == {
        "log.retention.ms": "1000", "log.cleanup.policy": "delete,compact", "max.connections": "5"}
    assert parse_add_config("") == {}
    for bad in ("log.retention.ms", "=5"):
        with pytest.raises(AdminError):
            parse_add_config(bad)
