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


def _parsed(*argv):
    import argparse

    from kbroker.admin.configs_cmd import add_configs_command

    parser = argparse.ArgumentParser()
    add_configs_command(parser.add_subparsers(dest="command"))
    return parser.parse_args(["configs", *argv])


def test_groups_are_named_as_kafka_configs_sh_names_them():
    from kbroker.admin.configs_cmd import RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC, _resource

    assert _resource(_parsed("describe", "--group", "g")) == (RESOURCE_GROUP, "g", "group g")
    assert _resource(_parsed("alter", "--entity-type", "groups", "--entity-name", "g",
                             "--add-config", "consumer.heartbeat.interval.ms=6000")) == (RESOURCE_GROUP, "g", "group g")
    assert _resource(_parsed("describe", "--entity-type", "topics", "--entity-name", "t")) == (
        RESOURCE_TOPIC, "t", "topic t")
    assert _resource(_parsed("describe", "--entity-type", "brokers", "--entity-default")) == (
        RESOURCE_BROKER, "", "brokers in the cluster")
    assert _resource(_parsed("describe", "--entity-type", "brokers", "--entity-name", "1")) == (
        RESOURCE_BROKER, "1", "broker 1")
    for argv in (("--entity-type", "groups"), ("--entity-type", "brokers", "--entity-name", "one"),
                 ("--entity-type", "groups", "--entity-default"), ("--topic", "t", "--entity-name", "x")):
        with pytest.raises(AdminError):
            _resource(_parsed("describe", *argv))
