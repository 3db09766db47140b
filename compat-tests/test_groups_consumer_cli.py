"""`kbroker groups list | describe` and the metrics endpoint for a consumer-protocol (KIP-848)
group: two librdkafka members (`group.protocol=consumer`, processes of their own, groupkit) split a
4-partition topic; `list` shows the group's type, `describe` its epochs, both members with their
current and target assignments (which partition the topic, nothing pending revocation once
Stable) and the offsets rows; the metrics give the group's members, epoch, rebalances and an
assignment epoch lag of 0. One member leaves: one rebalance more, and the other holds everything.

The broker's heartbeat interval and session timeout are short for the test (`group.consumer.*`,
lowered minimums), so the group settles within a second or two of a change."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import groupkit as gk
import metricskit as mk
from kbroker.admin.client import AdminClient
from kbroker.admin.consumer_groups import describe_consumer_group

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parent.parent
PARTITIONS = 4
RECORDS = 40
MEMBER = str(gk.HERE / "group_members" / "confluent_member.py")
KBROKER_OVERRIDES = {
    "metrics.listener": mk.LISTENER_ANY_PORT,
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
}


def groups(kbroker, *args: str) -> subprocess.CompletedProcess:
    cp = subprocess.run([sys.executable, "-m", "kbroker", "groups", *args, "--bootstrap-server", kbroker.bootstrap,
                         "--timeout", "15"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, f"kbroker groups {' '.join(args)} failed ({cp.returncode}): {cp.stderr}"
    return cp


def groups_json(kbroker, *args: str):
    return json.loads(groups(kbroker, *args, "--output", "json").stdout)


def wait_settled(kbroker, group: str, members: int, timeout: float = 20) -> dict:
    """`describe --output json` once the group is Stable with `members` members, every one at the
    assignment epoch (waited for in-process: a command costs a second of interpreter start-up)."""
    def settled(desc) -> bool:
        return (desc is not None and desc.state == "Stable" and len(desc.members) == members
                and all(m.member_epoch == desc.assignment_epoch for m in desc.members))

    with AdminClient(kbroker.bootstrap, timeout=15) as admin:
        deadline = time.monotonic() + timeout
        while not settled(desc := describe_consumer_group(admin, group)):
            assert time.monotonic() < deadline, f"group {group} did not settle with {members} members:\n{desc}"
            time.sleep(0.1)
    return groups_json(kbroker, "describe", group)


def partitions_of(assignment: list[dict], topic: str) -> set[int]:
    return {p for entry in assignment if entry["topic"] == topic for p in entry["partitions"]}


def test_list_describe_and_metrics_of_a_consumer_protocol_group(kbroker, kt, tmp_path):
    ck = kt.require_module("confluent_kafka")
    topic = kt.topic_name("kip848-cli")
    group = f"g-{topic}"
    with AdminClient(kbroker.bootstrap, timeout=15) as admin:
        admin.create_topic(topic, partitions=PARTITIONS, replication_factor=1, configs={})
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, value=b"v", partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    started = []
    try:
        for name in ("a", "b"):
            started.append(gk.Member([sys.executable, MEMBER, kbroker.bootstrap, group, topic,
                                      "--group-protocol", "consumer"], name, tmp_path))
        a, b = started
        gk.wait_balanced([a, b], PARTITIONS, 30)
        desc = wait_settled(kbroker, group, 2)

        listed = {g["group_id"]: g for g in groups_json(kbroker, "list")}
        assert listed[group] == {"group_id": group, "group_type": "consumer", "state": "Stable",
                                 "protocol_type": "consumer"}
        row = next(ln.split() for ln in groups(kbroker, "list").stdout.splitlines() if ln.startswith(group + " "))
        assert row == [group, "consumer", "Stable", "consumer"]

        assert (desc["group_type"], desc["protocol_type"], desc["assignment_strategy"]) == (
            "consumer", "consumer", "uniform")
        assert desc["group_epoch"] == desc["assignment_epoch"] >= 2
        held = []
        for m in desc["members"]:
            current = partitions_of(m["assignment"], topic)
            assert current == partitions_of(m["target_assignment"], topic) and current
            assert m["pending_revocation"] == [] and m["subscribed_topics"] == [topic]
            held.append(current)
        assert held[0].isdisjoint(held[1]) and held[0] | held[1] == set(range(PARTITIONS))
        assert {frozenset(h) for h in held} == {frozenset(a.assignment), frozenset(b.assignment)}
        owner = {p: m["consumer_id"] for m in desc["members"] for p in partitions_of(m["assignment"], topic)}
        rows = {r["partition"]: r for r in desc["offsets"] if r["topic"] == topic}
        assert sorted(rows) == list(range(PARTITIONS))
        for p, r in rows.items():
            assert (r["log_end_offset"], r["consumer_id"]) == (RECORDS // PARTITIONS, owner[p])

        text = groups(kbroker, "describe", group).stdout.splitlines()
        state_at = next(i for i, ln in enumerate(text) if ln.startswith("GROUP ") and "GROUP-EPOCH" in ln)
        assert text[state_at + 1].split()[:2] == [group, "consumer"]
        assert text[state_at + 1].split()[-4:] == ["Stable", str(desc["group_epoch"]), str(desc["assignment_epoch"]),
                                                   "2"]
        members_at = next(i for i, ln in enumerate(text) if "PENDING-REVOCATION" in ln)
        assert {ln.split()[1] for ln in text[members_at + 1:members_at + 3]} == set(owner.values())

        url = None if kbroker.proc is None else kt.wait_until(lambda: mk.metrics_url(kbroker.stderr_path), 10,
                                                              "the broker to log its metrics endpoint")
        if url is not None:
            got = mk.scrape(url)
            assert mk.value(got, "kbroker_consumer_group_members", group=group) == 2
            assert mk.value(got, "kbroker_consumer_group_epoch", group=group) == desc["group_epoch"]
            assert mk.value(got, "kbroker_consumer_group_assignment_epoch_lag", group=group) == 0
            # a new group on a coordinator that never reloaded it: every epoch was a rebalance seen here
            assert mk.value(got, "kbroker_consumer_group_rebalances_total", group=group) == desc["group_epoch"]
            assert mk.value(got, "kafka_server_group_coordinator_metrics_consumer_group_rebalance_count_total") \
                >= desc["group_epoch"]
            assert mk.value(got, "kafka_consumergroup_members", consumergroup=group) == 2

        assert b.terminate() == 0, b.describe()
        gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 20, "the remaining member to own everything", [a])
        after = wait_settled(kbroker, group, 1)
        assert after["group_epoch"] == desc["group_epoch"] + 1
        [m] = after["members"]
        assert partitions_of(m["assignment"], topic) == set(range(PARTITIONS)) and m["pending_revocation"] == []
        if url is not None:
            got = mk.scrape(url)
            assert mk.value(got, "kbroker_consumer_group_rebalances_total", group=group) == after["group_epoch"]
            assert mk.value(got, "kbroker_consumer_group_members", group=group) == 1
            assert mk.value(got, "kbroker_consumer_group_assignment_epoch_lag", group=group) == 0
    finally:
        for m in started:
            m.kill()
