"""`kbroker topics` (the kafka-topics.sh jobs) against a real single-node broker: create (partition
count, explicit replica assignment, configs, duplicates, --if-not-exists), list (--exclude-internal
once __consumer_offsets exists), describe as text and JSON (on one node the broker is every
partition's leader, replica and ISR), the partition filters, alter (partitions up, a refused
decrease, configs set and removed) and delete (--if-exists).

The command runs as `python -m kbroker topics ...` in a subprocess, as a script would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parent.parent
FILTERS = ("--under-replicated-partitions", "--unavailable-partitions", "--under-min-isr-partitions")


def topics(kbroker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", "topics", *args,
                           "--bootstrap-server", kbroker.bootstrap, "--timeout", "20"],
                          cwd=REPO, capture_output=True, text=True, timeout=90)


def ok(kbroker, *args: str) -> str:
    cp = topics(kbroker, *args)
    assert cp.returncode == 0, f"kbroker topics {' '.join(args)} failed ({cp.returncode}): {cp.stderr}"
    return cp.stdout


def ok_json(kbroker, *args: str):
    return json.loads(ok(kbroker, *args, "--output", "json"))


def refused(kbroker, error: str, *args: str) -> subprocess.CompletedProcess:
    """The command fails with exit status 1 and one stderr line naming Kafka's error."""
    cp = topics(kbroker, *args)
    assert cp.returncode == 1, f"kbroker topics {' '.join(args)}: exit {cp.returncode}, expected 1\n{cp.stdout}"
    assert cp.stderr.startswith("kbroker topics: ") and cp.stderr.count("\n") == 1, cp.stderr
    assert error in cp.stderr, cp.stderr
    return cp


def described(kbroker, name: str) -> dict:
    [topic] = ok_json(kbroker, "describe", "--topic", name)
    assert topic["topic"] == name
    return topic


def listed(kbroker, *args: str) -> list[str]:
    return ok(kbroker, "list", *args).split()


@pytest.fixture(scope="module")
def node(kbroker, kt) -> int:
    """The broker's id, as the leader of a new topic's partition."""
    name = kt.topic_name("topics-cli", "probe")
    ok(kbroker, "create", name, "--partitions", "1")
    [partition] = described(kbroker, name)["partitions"]
    return partition["leader"]


def test_create_with_partitions_and_duplicates(kbroker, kt, node):
    name = kt.topic_name("topics-cli", "create")
    assert ok(kbroker, "create", name, "--partitions", "3", "--replication-factor", "1") == f"Created topic {name}.\n"
    topic = described(kbroker, name)
    assert (topic["partition_count"], topic["replication_factor"], topic["internal"]) == (3, 1, False)
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]

    refused(kbroker, "TOPIC_ALREADY_EXISTS", "create", name, "--partitions", "5")
    again = topics(kbroker, "create", name, "--partitions", "5", "--if-not-exists")
    assert again.returncode == 0 and again.stdout == "", again.stderr
    assert described(kbroker, name)["partition_count"] == 3  # untouched
    assert ok_json(kbroker, "create", name, "--if-not-exists") == {"topic": name, "created": False}

    made = ok_json(kbroker, "create", name + "-j", "--partitions", "2")
    assert (made["topic"], made["created"], made["partitions"], made["replication_factor"]) == (name + "-j", True, 2, 1)
    assert made["topic_id"] == described(kbroker, name + "-j")["topic_id"]

    refused(kbroker, "INVALID_REPLICATION_FACTOR", "create", name + "-rf", "--replication-factor", "2")
    refused(kbroker, "INVALID_CONFIG", "create", name + "-cfg", "--config", "no.such.config=1")
    assert name + "-rf" not in listed(kbroker) and name + "-cfg" not in listed(kbroker)


def test_create_with_an_assignment_and_configs(kbroker, kt, node):
    name = kt.topic_name("topics-cli", "assigned")
    ok(kbroker, "create", name, "--replica-assignment", f"{node},{node}",
       "--config", "retention.ms=123456", "--config", "cleanup.policy=compact,delete")
    topic = described(kbroker, name)
    assert (topic["partition_count"], topic["replication_factor"]) == (2, 1)
    assert [p["replicas"] for p in topic["partitions"]] == [[node], [node]]
    assert topic["configs"]["retention.ms"] == "123456"
    assert topic["configs"]["cleanup.policy"] == "compact,delete"
    header = ok(kbroker, "describe", "--topic", name).splitlines()[0].split("\t")
    assert header[2:4] == ["PartitionCount: 2", "ReplicationFactor: 1"]
    configs = header[4].removeprefix("Configs: ")
    assert "retention.ms=123456" in configs and "cleanup.policy=compact,delete" in configs

    refused(kbroker, "INVALID_REPLICA_ASSIGNMENT", "create", name + "-x", "--replica-assignment", f"{node + 100}")
    assert name + "-x" not in listed(kbroker)


def test_list_and_exclude_internal(kbroker, kt, node):
    name = kt.topic_name("topics-cli", "list")
    ok(kbroker, "create", name, "--partitions", "1")
    assert name in listed(kbroker) and name in listed(kbroker, "--exclude-internal")
    assert listed(kbroker) == sorted(listed(kbroker))

    # a group's committed offset makes the broker create __consumer_offsets
    cp = subprocess.run([sys.executable, "-m", "kbroker", "groups", "reset-offsets", f"g-{name}", "--topic",
                         f"{name}:0", "--to-offset", "0", "--execute", "--bootstrap-server", kbroker.bootstrap],
                        cwd=REPO, capture_output=True, text=True, timeout=90)
    assert cp.returncode == 0, cp.stderr
    everything = listed(kbroker)
    assert "__consumer_offsets" in everything and name in everything
    without = listed(kbroker, "--exclude-internal")
    assert "__consumer_offsets" not in without and name in without
    by_name = {t["topic"]: t for t in ok_json(kbroker, "list")}
    assert by_name["__consumer_offsets"]["internal"] is True and by_name[name]["internal"] is False
    assert by_name[name]["partitions"] == 1
    assert "__consumer_offsets" not in {t["topic"] for t in ok_json(kbroker, "describe", "--exclude-internal")}


def test_describe_text_and_json(kbroker, kt, node):
    name = kt.topic_name("topics-cli", "describe")
    ok(kbroker, "create", name, "--partitions", "2")
    topic = described(kbroker, name)
    assert topic["topic_id"]
    for index, p in enumerate(topic["partitions"]):
        assert p == {"partition": index, "leader": node, "replicas": [node], "isr": [node], "offline": [],
                     "under_replicated": False, "unavailable": False, "under_min_isr": False, "at_min_isr": True,
                     "reassignment": None}  # a single node has no moves
    assert topic["min_insync_replicas"] == 1

    lines = ok(kbroker, "describe", "--topic", name).splitlines()
    assert len(lines) == 3
    assert lines[0].split("\t")[:4] == [f"Topic: {name}", f"TopicId: {topic['topic_id']}", "PartitionCount: 2",
                                        "ReplicationFactor: 1"]
    assert lines[0].split("\t")[4].startswith("Configs: ")
    assert lines[1:] == [f"\tTopic: {name}\tPartition: {i}\tLeader: {node}\tReplicas: {node}\tIsr: {node}\tOffline: "
                         for i in (0, 1)]
    everything = ok(kbroker, "describe").splitlines()  # no --topic: every topic
    assert lines[0] in everything and all(line in everything for line in lines[1:])
    refused(kbroker, "UNKNOWN_TOPIC_OR_PARTITION", "describe", "--topic", name + "-missing")


def test_filters_on_a_single_node(kbroker, kt, node):
    name = kt.topic_name("topics-cli", "filters")
    ok(kbroker, "create", name, "--partitions", "3")
    assert len(ok(kbroker, "describe", "--topic", name).splitlines()) == 4
    for flag in FILTERS:  # the one broker leads every partition and is its whole ISR
        assert ok(kbroker, "describe", "--topic", name, flag) == "", flag
        assert ok_json(kbroker, "describe", "--topic", name, flag) == [], flag
    assert ok(kbroker, "describe", *FILTERS) == ""  # every topic
    # ISR of 1 is exactly the default min.insync.replicas=1 ...
    at_min = ok(kbroker, "describe", "--topic", name, "--at-min-isr-partitions").splitlines()
    assert [line.split("\t")[2] for line in at_min] == ["Partition: 0", "Partition: 1", "Partition: 2"]
    # ... and below it once the topic asks for 2
    ok(kbroker, "alter", name, "--config", "min.insync.replicas=2")
    under = ok(kbroker, "describe", "--topic", name, "--under-min-isr-partitions").splitlines()
    assert under == [f"\tTopic: {name}\tPartition: {i}\tLeader: {node}\tReplicas: {node}\tIsr: {node}\tOffline: "
                     for i in range(3)]
    assert ok(kbroker, "describe", "--topic", name, "--under-replicated-partitions") == ""


def test_alter_partitions(kbroker, kt, node):
    name = kt.topic_name("topics-cli", "grow")
    ok(kbroker, "create", name, "--partitions", "2")
    assert ok_json(kbroker, "alter", name, "--partitions", "5")["partitions"] == 5
    topic = described(kbroker, name)
    assert topic["partition_count"] == 5
    assert [(p["partition"], p["leader"], p["isr"]) for p in topic["partitions"]] == [
        (i, node, [node]) for i in range(5)]
    assert "PartitionCount: 5" in ok(kbroker, "describe", "--topic", name).splitlines()[0]

    refused(kbroker, "INVALID_PARTITIONS", "alter", name, "--partitions", "3")
    refused(kbroker, "INVALID_PARTITIONS", "alter", name, "--partitions", "5")
    assert described(kbroker, name)["partition_count"] == 5
    refused(kbroker, "UNKNOWN_TOPIC_OR_PARTITION", "alter", name + "-missing", "--partitions", "9")


def test_alter_configs(kbroker, kt, node):
    name = kt.topic_name("topics-cli", "configs")
    ok(kbroker, "create", name, "--partitions", "1", "--config", "retention.ms=1000")
    assert described(kbroker, name)["configs"]["retention.ms"] == "1000"
    ok(kbroker, "alter", name, "--config", "retention.ms=2000", "--config", "cleanup.policy=compact")
    configs = described(kbroker, name)["configs"]
    assert (configs["retention.ms"], configs["cleanup.policy"]) == ("2000", "compact")
    done = ok_json(kbroker, "alter", name, "--delete-config", "retention.ms")
    assert done == {"topic": name, "partitions": None, "set": {}, "deleted": ["retention.ms"]}
    configs = described(kbroker, name)["configs"]
    assert "retention.ms" not in configs and configs["cleanup.policy"] == "compact"
    assert "retention.ms=" not in ok(kbroker, "describe", "--topic", name).splitlines()[0]

    refused(kbroker, "INVALID_CONFIG", "alter", name, "--config", "no.such.config=1")
    refused(kbroker, "UNKNOWN_TOPIC_OR_PARTITION", "alter", name + "-missing", "--config", "retention.ms=1")


def test_delete(kbroker, kt, node):
    name = kt.topic_name("topics-cli", "delete")
    ok(kbroker, "create", name, "--partitions", "2")
    assert ok(kbroker, "delete", name) == f"Deleted topic {name}.\n"
    kt.wait_until(lambda: name not in listed(kbroker), 20, f"{name} to leave the topic list")
    refused(kbroker, "UNKNOWN_TOPIC_OR_PARTITION", "describe", "--topic", name)
    refused(kbroker, "UNKNOWN_TOPIC_OR_PARTITION", "delete", name)
    gone = topics(kbroker, "delete", name, "--if-exists")
    assert gone.returncode == 0 and gone.stdout == "", gone.stderr
    assert ok_json(kbroker, "delete", name, "--if-exists") == {"deleted": [], "not_found": [name], "failed": {}}
    # the name can be used again, for a new topic
    ok(kbroker, "create", name, "--partitions", "1")
    assert described(kbroker, name)["partition_count"] == 1


def test_broker_down_is_a_clean_error(kbroker, kt):
    port = kt.free_port()
    cp = subprocess.run([sys.executable, "-m", "kbroker", "topics", "list", "--bootstrap-server",
                         f"127.0.0.1:{port}"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 1
    assert cp.stderr.strip() == f"kbroker topics: cannot connect to 127.0.0.1:{port}: Connection refused"
