"""`kbroker groups` (the kafka-consumer-groups.sh jobs) against a real broker, with a kafka-python
consumer group on the other side: list and describe an active group (state, members, committed
offsets, lag), reset-offsets refused while it is active, dry run, every reset strategy executed and
seen by a fresh consumer of the group, delete.

The command runs as `python -m kbroker groups ... --output json` in a subprocess, as a script would.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parent.parent
PARTITIONS = 3
PER_PARTITION = 10
# The first rebalance of a new group waits 3 s for more members by default; one member is all we have.
KBROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


def groups(kbroker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", "groups", *args,
                           "--bootstrap-server", kbroker.bootstrap, "--timeout", "20"],
                          cwd=REPO, capture_output=True, text=True, timeout=90)


def groups_json(kbroker, *args: str):
    cp = groups(kbroker, *args, "--output", "json")
    assert cp.returncode == 0, f"kbroker groups {' '.join(args)} failed ({cp.returncode}): {cp.stderr}"
    return json.loads(cp.stdout)


def committed(kbroker, group: str) -> dict[int, int | None]:
    return {r["partition"]: r["current_offset"] for r in groups_json(kbroker, "describe", group)["offsets"]
            if r["topic"] is not None}


@pytest.fixture(scope="module")
def topic(kbroker, kt):
    """A 3-partition topic with 10 records per partition; record j of each partition has
    timestamp base + j*1000."""
    kafka = kt.require_module("kafka")
    from kafka.admin import NewTopic

    name = kt.topic_name("groups-cli")
    admin = kafka.KafkaAdminClient(bootstrap_servers=kbroker.bootstrap, request_timeout_ms=20000)
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    admin.close()
    base = int(time.time() * 1000) // 1000 * 1000 - 3_600_000
    producer = kafka.KafkaProducer(bootstrap_servers=kbroker.bootstrap, acks="all")
    for j in range(PER_PARTITION):
        for p in range(PARTITIONS):
            producer.send(name, f"{p}-{j}".encode(), partition=p, timestamp_ms=base + 1000 * j)
    producer.flush()
    producer.close()
    return name, base


def consumer_in_group(kbroker, kt, group: str, topic: str, reset: str = "earliest"):
    """A subscribed consumer that owns every partition (bounded wait for the assignment).

    kafka-python 3.0.12 can lose a JoinGroup/SyncGroup round that completes just as a `poll()`
    times out: the assignment is never applied and heartbeats stay disabled, so the member sits
    unassigned until the broker expires its session. Long polls make that coincidence rare, and a
    consumer caught in it is closed (it leaves the group) and replaced once.
    """
    kafka = kt.require_module("kafka")
    for _attempt in range(2):
        consumer = kafka.KafkaConsumer(bootstrap_servers=kbroker.bootstrap, group_id=group, client_id=f"cli-{group}",
                                       enable_auto_commit=False, auto_offset_reset=reset,
                                       session_timeout_ms=10000, heartbeat_interval_ms=500)
        consumer.subscribe([topic])
        deadline = time.monotonic() + 15
        records = []
        while len(consumer.assignment()) < PARTITIONS and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                records.extend(batch)
        if len(consumer.assignment()) == PARTITIONS:
            return consumer, records
        consumer.close()
    pytest.fail(f"no full assignment for group {group} after two consumers of 15 s each")


def commit(kt, consumer, topic: str, offsets: dict[int, int]) -> None:
    from kafka.structs import OffsetAndMetadata, TopicPartition

    consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})


def wait_state(kbroker, group: str, state: str, timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        desc = groups_json(kbroker, "describe", group)
        if desc["state"] == state or time.monotonic() > deadline:
            assert desc["state"] == state, f"group {group} is {desc['state']}, not {state}, after {timeout} s"
            return desc
        time.sleep(0.2)


def empty_group_with(kbroker, kt, topic: str, offsets: dict[int, int]) -> str:
    """A group that consumed and committed `offsets`, then closed: Empty, offsets kept."""
    group = f"cli-{uuid.uuid4().hex[:8]}"
    consumer, _ = consumer_in_group(kbroker, kt, group, topic)
    commit(kt, consumer, topic, offsets)
    consumer.close()
    wait_state(kbroker, group, "Empty")
    return group


def first_offsets(kbroker, kt, group: str, topic: str) -> dict[int, int]:
    """Where a fresh consumer of `group` starts on each partition ('latest' when nothing is committed,
    so only committed offsets can make it start anywhere else)."""
    consumer, records = consumer_in_group(kbroker, kt, group, topic, reset="latest")
    try:
        from kafka.structs import TopicPartition

        return {p: consumer.position(TopicPartition(topic, p)) - sum(1 for r in records if r.partition == p)
                for p in range(PARTITIONS)}
    finally:
        consumer.close()


def test_active_group_list_describe_and_refused_reset(kbroker, kt, topic):
    name, _base = topic
    group = f"cli-{uuid.uuid4().hex[:8]}"
    consumer, _ = consumer_in_group(kbroker, kt, group, name)
    try:
        commit(kt, consumer, name, {0: 4, 1: 6})  # partition 2: nothing committed

        listed = {g["group_id"]: g for g in groups_json(kbroker, "list")}
        assert listed[group] == {"group_id": group, "group_type": "classic", "state": "Stable",
                                 "protocol_type": "consumer"}
        assert group in {g["group_id"] for g in groups_json(kbroker, "list", "--state", "stable")}
        assert group not in {g["group_id"] for g in groups_json(kbroker, "list", "--state", "Empty,Dead")}

        desc = groups_json(kbroker, "describe", group)
        assert (desc["state"], desc["protocol_type"]) == ("Stable", "consumer")
        assert desc["assignment_strategy"]
        [member] = desc["members"]
        assert member["client_id"] == f"cli-{group}"
        assert member["subscribed_topics"] == [name]
        assert member["assignment"] == [{"topic": name, "partitions": [0, 1, 2]}]
        rows = {r["partition"]: r for r in desc["offsets"]}
        assert sorted(rows) == [0, 1, 2]
        for p, current in ((0, 4), (1, 6), (2, None)):
            row = rows[p]
            assert (row["topic"], row["current_offset"], row["log_end_offset"]) == (name, current, PER_PARTITION)
            assert row["lag"] == (None if current is None else PER_PARTITION - current)
            assert (row["consumer_id"], row["client_id"]) == (member["consumer_id"], f"cli-{group}")

        text = groups(kbroker, "describe", group)
        assert text.returncode == 0, text.stderr
        lines = [ln.split() for ln in text.stdout.splitlines()]
        assert lines[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                            "CONSUMER-ID", "HOST", "CLIENT-ID"]
        assert lines[3][:6] == [group, name, "2", "-", str(PER_PARTITION), "-"]

        for extra in ((), ("--execute",)):
            refused = groups(kbroker, "reset-offsets", group, "--topic", name, "--to-earliest", *extra)
            assert refused.returncode == 1
            assert "Stable" in refused.stderr and group in refused.stderr
        assert committed(kbroker, group) == {0: 4, 1: 6, 2: None}
    finally:
        consumer.close()

    desc = wait_state(kbroker, group, "Empty")
    assert desc["members"] == []
    assert {r["partition"]: (r["current_offset"], r["consumer_id"]) for r in desc["offsets"]} == {
        0: (4, None), 1: (6, None)}
    assert group in {g["group_id"] for g in groups_json(kbroker, "list", "--state", "Empty")}


def test_dry_run_prints_the_plan_and_changes_nothing(kbroker, kt, topic):
    name, _ = topic
    group = empty_group_with(kbroker, kt, name, {0: 4, 1: 6, 2: 8})
    plan = groups_json(kbroker, "reset-offsets", group, "--topic", name, "--to-earliest")
    assert plan["executed"] is False
    assert [(o["partition"], o["current_offset"], o["new_offset"]) for o in plan["offsets"]] == [
        (0, 4, 0), (1, 6, 0), (2, 8, 0)]
    text = groups(kbroker, "reset-offsets", group, "--topic", f"{name}:1", "--to-latest", "--dry-run")
    assert text.returncode == 0, text.stderr
    assert [ln.split() for ln in text.stdout.splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [group, name, "1", str(PER_PARTITION)]]
    assert "--execute" in text.stderr
    assert committed(kbroker, group) == {0: 4, 1: 6, 2: 8}


def test_execute_to_earliest_and_a_fresh_consumer_starts_from_zero(kbroker, kt, topic):
    name, _ = topic
    group = empty_group_with(kbroker, kt, name, {0: 4, 1: 6})
    done = groups_json(kbroker, "reset-offsets", group, "--topic", name, "--to-earliest", "--execute")
    assert done["executed"] is True
    assert committed(kbroker, group) == {0: 0, 1: 0, 2: 0}
    assert first_offsets(kbroker, kt, group, name) == {0: 0, 1: 0, 2: 0}


def test_shift_by_to_datetime_to_latest_to_offset(kbroker, kt, topic):
    name, base = topic
    group = empty_group_with(kbroker, kt, name, {0: 4, 1: 6, 2: 1})

    def reset(*how: str, scope: tuple[str, ...] = ("--topic", name)) -> dict[int, int | None]:
        groups_json(kbroker, "reset-offsets", group, *scope, *how, "--execute")
        return committed(kbroker, group)

    assert reset("--shift-by", "-2") == {0: 2, 1: 4, 2: 0}  # 1 - 2 is clamped to the log start
    clamped = groups(kbroker, "reset-offsets", group, "--all-topics", "--shift-by", "-5")
    assert clamped.returncode == 0 and "lower than earliest" in clamped.stderr
    # record j has timestamp base + j*1000: the first at or after base + 4500 is offset 5
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((base + 4500) // 1000)) + ".500+00:00"
    assert reset("--to-datetime", iso) == {0: 5, 1: 5, 2: 5}
    future = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() + 86400))
    assert reset("--to-datetime", future, scope=("--topic", f"{name}:0")) == {0: 10, 1: 5, 2: 5}
    assert reset("--to-offset", "3", scope=("--topic", f"{name}:1,2")) == {0: 10, 1: 3, 2: 3}
    assert reset("--to-offset", "99", scope=("--all-topics",)) == {0: 10, 1: 10, 2: 10}
    assert reset("--shift-by", "-4", scope=("--all-topics",)) == {0: 6, 1: 6, 2: 6}
    assert first_offsets(kbroker, kt, group, name) == {0: 6, 1: 6, 2: 6}
    assert reset("--to-latest") == {0: 10, 1: 10, 2: 10}


def test_reset_of_a_new_group_and_errors(kbroker, kt, topic):
    name, _ = topic
    group = f"cli-new-{uuid.uuid4().hex[:8]}"
    missing = groups(kbroker, "describe", group)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    # a group nobody joined yet can be given offsets (it is Dead, which Kafka also resets)
    groups_json(kbroker, "reset-offsets", group, "--topic", f"{name}:0", "--to-offset", "7", "--execute")
    assert committed(kbroker, group) == {0: 7}
    shift = groups(kbroker, "reset-offsets", group, "--topic", name, "--shift-by", "1")
    assert shift.returncode == 1 and "no committed offset" in shift.stderr
    unknown = groups(kbroker, "reset-offsets", group, "--topic", "no-such-topic-" + group, "--to-earliest")
    assert unknown.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr


def test_delete(kbroker, kt, topic):
    name, _ = topic
    group = empty_group_with(kbroker, kt, name, {0: 1})
    consumer, _ = consumer_in_group(kbroker, kt, f"{group}-active", name)
    try:
        busy = groups(kbroker, "delete", f"{group}-active")
        assert busy.returncode == 1 and "NON_EMPTY_GROUP" in busy.stdout
    finally:
        consumer.close()
    done = groups(kbroker, "delete", group)
    assert done.returncode == 0 and "was successful" in done.stdout, done.stdout + done.stderr
    gone = groups(kbroker, "describe", group)
    assert gone.returncode == 1 and "does not exist" in gone.stderr
    assert group not in {g["group_id"] for g in groups_json(kbroker, "list")}


def test_broker_down_is_a_clean_error(kbroker, kt):
    port = kt.free_port()
    cp = subprocess.run([sys.executable, "-m", "kbroker", "groups", "list", "--bootstrap-server",
                         f"127.0.0.1:{port}"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 1
    assert cp.stderr.strip() == f"kbroker groups: cannot connect to 127.0.0.1:{port}: Connection refused"
