"""`kbroker share-groups` (the kafka-share-groups.sh jobs) against a real broker process, with
confluent-kafka's ShareConsumer as the share group's member: list and describe an active group
(members, state, start offsets and lag), reset-offsets refused while it has a member, then executed
once it is empty and seen by the next consumer (every record delivered again), delete-offsets,
delete, and the refusals for an unknown group and a group of another type.

The command runs as `python -m kbroker share-groups ...` in a subprocess, as a script would. It
uses only Kafka's APIs, so KBROKER_COMPAT_EXTERNAL=host:port runs it against Apache Kafka 4 too.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import settled

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parent.parent
KBROKER_OVERRIDES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
                     "group.share.heartbeat.interval.ms": "500",
                     "group.share.session.timeout.ms": "5000"}  # a closed consumer is gone soon
PER_PARTITION = 10


def share_groups(kbroker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", "share-groups", "--bootstrap-server", kbroker.bootstrap,
                           "--timeout", "20", *args], cwd=REPO, capture_output=True, text=True, timeout=90, check=False)


def table(kbroker, *args: str) -> list[list[str]]:
    cp = share_groups(kbroker, *args)
    assert cp.returncode == 0, f"share-groups {' '.join(args)} failed: {cp.stderr}"
    return [line.split() for line in cp.stdout.splitlines() if line.strip()]


def poll(consumer, n: int, timeout_s: float) -> list[tuple[int, int]]:
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        for m in consumer.poll(0.2) or []:
            assert m.error() is None, m.error()
            got.append((m.partition(), m.offset()))
    return got


@pytest.fixture(scope="module")
def ck(kt):
    return kt.require_module("confluent_kafka")


def test_share_groups_cli(kt, kbroker, ck):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = kt.topic_name("share-cli")
    group = kt.topic_name("share-cli", "group")
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})  # kept alive until the topic is made
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    consumer = ck.ShareConsumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group,
                                 "client.id": "cli-test", "fetch.wait.max.ms": 100})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 3  # join and open the share session before producing (a share group starts at latest)
        while time.monotonic() < deadline:
            assert not consumer.poll(0.1)
        producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "linger.ms": 5})
        for i in range(2 * PER_PARTITION):
            producer.produce(topic, value=b"v%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        assert len(poll(consumer, 2 * PER_PARTITION, 30)) == 2 * PER_PARTITION
        poll(consumer, 1, 1)  # implicit acknowledgement of the last batch

        assert group in share_groups(kbroker, "--list").stdout.splitlines()
        assert [group, "Stable"] in table(kbroker, "--list", "--state", "Stable")
        assert [group, "Stable"] not in table(kbroker, "--list", "--state", "Empty")
        members = table(kbroker, "--describe", "--group", group, "--members")
        assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert len(members) == 2 and members[1][0] == group
        assert members[1][3:] == ["cli-test", "2", f"{topic}:0,1"]
        state = table(kbroker, "--describe", "--group", group, "--state")
        assert state[0] == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"] and state[1][-2:] == ["Stable", "1"]
        offsets = settled(lambda: table(kbroker, "--describe", "--group", group),
                           lambda t: [r[2:] for r in t[1:]] == [["0", "10", "0"], ["1", "10", "0"]])
        assert offsets[0] == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
        assert offsets[1:] == [[group, topic, "0", "10", "0"], [group, topic, "1", "10", "0"]]

        refused = share_groups(kbroker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                               "--execute")
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr.strip() == (f"kbroker share-groups: Share group '{group}' is not empty (state Stable, "
                                          "1 members); stop its consumers first: NON_EMPTY_GROUP")
        refused = share_groups(kbroker, "--delete", "--group", group)
        assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr
    finally:
        consumer.close()

    state = settled(lambda: table(kbroker, "--describe", "--group", group, "--state"), lambda t: t[1][-2:] == ["Empty", "0"])
    assert state[1][-2:] == ["Empty", "0"]
    dry = share_groups(kbroker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    assert dry.returncode == 0 and "Dry run" in dry.stderr
    assert table(kbroker, "--describe", "--group", group)[1][3:] == ["10", "0"]  # nothing altered
    assert table(kbroker, "--reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-earliest",
                 "--execute")[1:] == [[group, topic, "0", "0"]]
    assert [r[2:] for r in table(kbroker, "--describe", "--group", group)[1:]] == [["0", "0", "10"], ["1", "10", "0"]]

    again = ck.ShareConsumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group, "fetch.wait.max.ms": 100})
    again.subscribe([topic])
    try:  # partition 0 from its new start: its ten records once more
        assert sorted(poll(again, PER_PARTITION, 30)) == [(0, o) for o in range(PER_PARTITION)]
        poll(again, 1, 1)
    finally:
        again.close()
    settled(lambda: table(kbroker, "--describe", "--group", group, "--state"), lambda t: t[1][-2] == "Empty")

    deleted = table(kbroker, "--delete-offsets", "--group", group, "--topic", topic)
    assert deleted == [["TOPIC", "STATUS"], [topic, "Successful"]]
    assert share_groups(kbroker, "--describe", "--group", group).stdout.strip() == \
        f"Share group '{group}' has no offset information."
    cp = share_groups(kbroker, "--delete", "--group", group)
    assert (cp.returncode, cp.stdout.strip()) == (0, f"Deletion of requested share groups ('{group}') was successful.")
    assert group not in share_groups(kbroker, "--list").stdout.splitlines()
    gone = share_groups(kbroker, "--describe", "--group", group)
    assert gone.returncode == 1 and gone.stderr.strip() == (
        f"kbroker share-groups: Share group '{group}' does not exist (ShareGroupDescribe): GROUP_ID_NOT_FOUND")


def test_a_consumer_group_is_not_a_share_group(kt, kbroker, ck):
    topic = kt.topic_name("share-cli", "classic")
    group = kt.topic_name("share-cli", "classic-group")
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap})
    producer.produce(topic, b"x")
    assert producer.flush(30) == 0
    consumer = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[ck.TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()
    cp = share_groups(kbroker, "--describe", "--group", group)
    assert cp.returncode == 1 and cp.stdout == ""
    assert cp.stderr.strip() == (f"kbroker share-groups: Group '{group}' is not a share group "
                                 "(it is a classic group): GROUP_ID_NOT_FOUND")
    assert group not in share_groups(kbroker, "--list").stdout.splitlines()
    cp = share_groups(kbroker, "--reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute")
    assert cp.returncode == 1 and "is not a share group" in cp.stderr
