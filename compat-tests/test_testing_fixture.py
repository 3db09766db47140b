"""kbroker.testing for users' own suites: a suite written for testcontainers' Kafka module runs with
one import changed, in both modes (a thread of the test process, a child process); the pytest
plugin's `kafka_bootstrap` fixture; and the calls mirror testcontainers' own `KafkaContainer`."""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kbroker.testing import KafkaContainer, KbrokerError, config_key_of_env

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parent.parent
SUITE = REPO / "examples" / "testcontainers_suite"
DOCKER_IMPORT = "from testcontainers.kafka import KafkaContainer"
KBROKER_IMPORT = "from kbroker.testing import KafkaContainer"


def _pytest(where: Path, *args: str, mode: str = "thread") -> subprocess.CompletedProcess:
    """Run pytest in `where` as a user's project would: its own rootdir, no xdist."""
    env = {**os.environ, "KBROKER_TEST_MODE": mode, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-W", "ignore::DeprecationWarning", *args],
                          cwd=where, env=env, capture_output=True, text=True, timeout=200, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_testcontainers_suite_runs_with_one_import_changed(tmp_path, kt, mode):
    kt.require_module("kafka")
    kt.require_module("confluent_kafka")
    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite)
    conftest = (suite / "conftest.py").read_text()
    # the Docker version of the suite is this very text with the other import
    assert conftest.count(KBROKER_IMPORT) == 1 and DOCKER_IMPORT in conftest
    result = _pytest(suite, mode=mode)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "5 passed" in result.stdout, result.stdout[-2000:]


def test_the_pytest_plugin_gives_a_bootstrap_fixture(tmp_path, kt):
    kt.require_module("kafka")
    (tmp_path / "test_app.py").write_text(
        "import kafka\n"
        "def test_round_trip(kafka_bootstrap):\n"
        "    producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap)\n"
        "    assert producer.send('app', b'hello', partition=0).get(10).offset == 0\n"
        "    producer.close()\n"
        "    consumer = kafka.KafkaConsumer(bootstrap_servers=kafka_bootstrap, consumer_timeout_ms=10000)\n"
        "    consumer.assign([kafka.TopicPartition('app', 0)])\n"
        "    consumer.seek_to_beginning()\n"
        "    assert [m.value for m in consumer][:1] == [b'hello']\n"
        "def test_same_broker_for_the_session(kafka_broker, kafka_bootstrap):\n"
        "    assert kafka_broker.get_bootstrap_server() == kafka_bootstrap\n"
        "    assert kafka_broker.data_dir.is_dir()\n")
    result = _pytest(tmp_path, "-p", "kbroker.testing")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "2 passed" in result.stdout


def test_the_calls_mirror_testcontainers_kafka_container(kt):
    testcontainers = kt.require_module("testcontainers.kafka")
    theirs = testcontainers.KafkaContainer
    for name in ("start", "stop", "get_bootstrap_server", "get_container_host_ip", "get_exposed_port", "with_env",
                 "with_kraft", "with_cluster_id", "__enter__", "__exit__"):
        assert hasattr(theirs, name), name
        their_params = inspect.signature(getattr(theirs, name)).parameters
        our_params = inspect.signature(getattr(KafkaContainer, name)).parameters
        for param in their_params.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            assert param.name in our_params, f"{name}() lacks {param.name}"
            ours = our_params[param.name]
            assert ours.kind == param.kind, f"{name}({param.name}) is {ours.kind}, theirs {param.kind}"
            if param.name in ("image", "port", "force", "delete_volume", "timeout"):
                assert ours.default == param.default, f"{name}({param.name}) defaults to {ours.default}"


def test_confluent_image_environment_maps_to_broker_keys():
    assert config_key_of_env("KAFKA_LOG_RETENTION_MS") == "log.retention.ms"
    assert config_key_of_env("KAFKA_CONFLUENT_SUPPORT__METRICS___ENABLE") == "confluent.support_metrics-enable"
    assert config_key_of_env("KAFKA_LISTENERS") is None  # the container's network, not the broker's
    assert config_key_of_env("CLUSTER_ID") is None


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_start_failures_are_reported_not_hung(mode):
    broker = KafkaContainer(mode=mode, config={"log.retention.ms": "0"})  # Kafka's validator refuses 0
    with pytest.raises(KbrokerError, match="log.retention.ms"):
        broker.start(timeout=30)
    assert broker.data_dir is None  # cleaned up
    with pytest.raises(KbrokerError, match="not started"):
        broker.get_bootstrap_server()
