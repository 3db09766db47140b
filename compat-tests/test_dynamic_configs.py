"""Dynamic broker configs through stock admin clients (Java kafka-clients 3.9, confluent-kafka,
kafka-python; dynconfkit.py), one scenario parametrized over the families, on a single node:

- the cluster-wide default `log.retention.ms` set at run time is applied by the next retention pass:
  a topic without a retention override loses its old segments, one with an override keeps them;
  the topic describes the dynamic default it inherits;
- this broker's own `message.max.bytes` is described with its source and synonyms, and refuses a
  batch larger than it; a static key is refused with INVALID_CONFIG; validate_only changes nothing;
- after a restart every dynamic config is still there and still applied.

And in a two-broker cluster: a cluster default reaches every broker through ZooKeeper's config
change notifications; one broker's config stays on that broker.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import dynconfkit as dk

pytestmark = pytest.mark.timeout(240)

OVERRIDES = {"log.retention.check.interval.ms": "300", "log.segment.delete.delay.ms": "0"}
HOUR_MS = 3_600_000


def _produce_old_records(bootstrap: str, topic: str, n: int = 40) -> None:
    """Records an hour old, in many small segments (the topic's segment.bytes)."""
    import kafka

    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, batch_size=1,
                                   request_timeout_ms=30000, max_block_ms=30000)
    try:
        old = int(time.time() * 1000) - HOUR_MS
        for i in range(n):
            producer.send(topic, value=b"x" * 200, partition=0, timestamp_ms=old + i).get(30)
    finally:
        producer.close(10)


def _earliest(bootstrap: str, topic: str) -> int:
    import kafka
    from kafka import TopicPartition

    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        return consumer.beginning_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
    finally:
        consumer.close()


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    import kafka
    from kafka.admin import NewTopic

    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs=configs)])
    finally:
        admin.close()


def _oversized_record_refused(bootstrap: str, topic: str, size: int) -> bool:
    import kafka

    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0, request_timeout_ms=30000,
                                   max_block_ms=30000)
    try:
        producer.send(topic, value=b"y" * size, partition=0).get(30)
    except kafka.errors.MessageSizeTooLargeError:
        return True
    finally:
        producer.close(10)
    return False


@pytest.mark.parametrize("family", dk.FAMILIES)
def test_dynamic_broker_configs_apply_at_once_and_survive_a_restart(family, kt, tmp_path, request):
    kt.require_module("kafka")
    java = request.getfixturevalue("java_harness") if family == "java" else None
    broker = kt.Broker(tmp_path / "broker", OVERRIDES).start()
    try:
        admin = dk.Admin(family, broker.bootstrap, kt, java)
        default = dk.DEFAULT_RESOURCE[family]
        inherited_source = "DYNAMIC_DEFAULT_BROKER_CONFIG" if default == "" else "DYNAMIC_BROKER_CONFIG"
        small_segments = {"segment.bytes": "1000"}
        _create(broker.bootstrap, "plain", small_segments)
        _create(broker.bootstrap, "kept", {**small_segments, "retention.ms": "-1"})
        for topic in ("plain", "kept"):
            _produce_old_records(broker.bootstrap, topic)
        time.sleep(1)  # a few retention passes: the two-week default keeps everything
        assert (_earliest(broker.bootstrap, "plain"), _earliest(broker.bootstrap, "kept")) == (0, 0)

        # the cluster-wide default retention, applied by the next pass to the topic without an override
        assert admin.alter("broker", default, [("set", "log.retention.ms", "600000")]) == 0
        kt.wait_until(lambda: _earliest(broker.bootstrap, "plain") > 0, 15, "old segments deleted by retention")
        assert _earliest(broker.bootstrap, "kept") == 0
        retention = admin.describe("topic", "plain")["retention.ms"]
        assert (retention.value, retention.source) == ("600000", inherited_source)
        assert retention.synonyms[0] == ("log.retention.ms", "600000", inherited_source)

        # this broker's own config: described with its source and synonyms, and enforced
        assert admin.alter("broker", "0", [("set", "message.max.bytes", "5000")]) == 0
        described = admin.describe("broker", "0")
        mmb = described["message.max.bytes"]
        assert (mmb.value, mmb.source, mmb.read_only) == ("5000", "DYNAMIC_BROKER_CONFIG", False)
        assert mmb.synonyms == dk.as_shown(family, [("message.max.bytes", "5000", "DYNAMIC_BROKER_CONFIG"),
                                                     ("message.max.bytes", "1048588", "DEFAULT_CONFIG")])
        assert described["log.dirs"].read_only and described["log.dirs"].source == "STATIC_BROKER_CONFIG"
        assert not described["advertised.listeners"].read_only  # per-broker dynamic, as in Kafka
        assert _oversized_record_refused(broker.bootstrap, "kept", 8000)

        # refusals and validate_only
        assert admin.alter("broker", "0", [("set", "log.dirs", "/elsewhere")]) == 40  # INVALID_CONFIG
        assert admin.alter("broker", "0", [("set", "num.io.threads", "100")]) == 40  # more than double
        assert admin.alter("broker", "0", [("set", "log.segment.bytes", "2000")], validate_only=True) == 0
        assert admin.describe("broker", "0")["log.segment.bytes"].source == "DEFAULT_CONFIG"
        if default == "":
            assert admin.alter("broker", "", [("set", "listeners", "PLAINTEXT://127.0.0.1:1")]) == 40
            assert set(admin.describe("broker", "")) == {"log.retention.ms"}

        broker.restart()
        described = admin.describe("broker", "0")
        assert (described["message.max.bytes"].value, described["message.max.bytes"].source) == (
            "5000", "DYNAMIC_BROKER_CONFIG")
        assert (described["log.retention.ms"].value, described["log.retention.ms"].source) == (
            "600000", inherited_source)
        assert _oversized_record_refused(broker.bootstrap, "kept", 8000)
        assert _earliest(broker.bootstrap, "kept") == 0
    finally:
        broker.stop()


def test_a_cluster_default_reaches_every_broker_and_a_brokers_own_stays_there(kt, tmp_path):
    import clusterkit as ck

    cluster = ck.start_cluster(tmp_path / "cluster", 2)
    try:
        (id0, b0), (id1, b1) = sorted(cluster.brokers.items())
        a0, a1 = dk.Admin("confluent", b0.address, kt), dk.Admin("confluent", b1.address, kt)
        cli = subprocess.run([sys.executable, "-m", "kbroker", "configs", "alter", "--bootstrap-server", b0.address,
                              "--broker-defaults", "--add-config", "log.retention.ms=600000"],
                             capture_output=True, text=True, timeout=60, cwd=kt.REPO)
        assert cli.stdout.strip() == "Completed updating default config for brokers in the cluster.", cli.stderr
        assert a1.alter("broker", str(id1), [("set", "message.max.bytes", "5000")]) == 0

        def seen(admin, broker_id, key):
            entry = admin.describe("broker", broker_id)[key]
            return entry.value, entry.source

        ck.wait_for(lambda: seen(a1, str(id1), "log.retention.ms") == ("600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
                    15, "the cluster default on the other broker")
        assert seen(a0, str(id0), "log.retention.ms") == ("600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert seen(a1, str(id1), "message.max.bytes") == ("5000", "DYNAMIC_BROKER_CONFIG")
        assert seen(a0, str(id0), "message.max.bytes") == ("1048588", "DEFAULT_CONFIG")
        cli = subprocess.run([sys.executable, "-m", "kbroker", "configs", "describe", "--bootstrap-server",
                              b1.address, "--broker", str(id1)], capture_output=True, text=True, timeout=60, cwd=kt.REPO)
        assert cli.stdout.splitlines() == [
            f"Dynamic configs for broker {id1} are:",
            "  log.retention.ms=600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=600000"
            ", DEFAULT_CONFIG:log.retention.hours=336}",
            "  message.max.bytes=5000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=5000, "
            "DEFAULT_CONFIG:message.max.bytes=1048588}"], cli.stderr
    finally:
        ck.stop_cluster(cluster)
