"""`kbroker cluster status` and the moves shown by `kbroker topics describe`, without a real broker:
the progress arithmetic and bar, the status counts and layout from made-up partitions, and both
commands end to end against fake brokers (Metadata, DescribeConfigs, ListPartitionReassignments at
the controller, DescribeLogDirs at each broker, one of them silent)."""

import json
import time

import pytest

from kbroker.admin.client import (API_VERSIONS, DESCRIBE_CONFIGS, DESCRIBE_LOG_DIRS, LIST_PARTITION_REASSIGNMENTS,
                                  METADATA, Broker, PartitionState, TopicState)
from kbroker.admin.log_dirs import partition_sizes
from kbroker.admin.progress import Move, bar, build_moves, human_bytes, progress, progress_text
from kbroker.admin.status import cluster_status, status_text
from kbroker.admin.topics import describe_data, describe_text, partition_flags, topic_views
from kbroker.cli import main
from test_admin_client import FakeBroker, api_versions  # the fake broker of the client tests


def move(adding=(4,), isr=(1, 2), leader_bytes=26_500_000, replica_bytes=None, unknown=()):
    replica_bytes = {4: 12_000_000} if replica_bytes is None else replica_bytes
    return Move("orders", 0, (1, *adding, 2), tuple(adding), (2,), 1, tuple(isr), leader_bytes, replica_bytes,
                tuple(unknown))


# -- progress ------------------------------------------------------------------------------------

def test_progress_is_bytes_copied_against_the_leaders_size():
    p = progress(move())
    assert (p.copied, p.total) == (12_000_000, 26_500_000) and p.fraction == pytest.approx(0.4528, abs=1e-4)
    assert progress_text(move()) == "[#########-----------]  45%  12.0 MB / 26.5 MB"
    # two adding replicas: each must hold the leader's bytes
    two = move(adding=(4, 5), replica_bytes={4: 26_500_000, 5: 0})
    assert progress(two) == (pytest.approx(0.5), 26_500_000, 53_000_000)
    # a replica in the ISR has caught up, whatever it holds; a bigger one counts as the leader's size
    assert progress(move(adding=(4, 5), isr=(1, 2, 5), replica_bytes={4: 99_000_000, 5: None})) == (
        pytest.approx(0.999), 53_000_000, 53_000_000)
    assert progress_text(move(adding=(4, 5), isr=(1, 2, 4, 5), replica_bytes={4: None, 5: None})).startswith(
        "[####################] 100%")


def test_unknown_sizes_and_empty_partitions():
    unknown = move(replica_bytes={4: None}, unknown=("broker 4: offline",))
    assert progress(unknown) == (None, None, 26_500_000)
    assert progress_text(unknown) == "[????????????????????]    ?  ? / 26.5 MB  (broker 4: offline)"
    no_leader = move(leader_bytes=None, unknown=("no leader",))
    assert progress(no_leader) == (None, None, None)
    assert progress(move(leader_bytes=None, isr=(1, 2, 4))) == (1.0, None, None)  # in the ISR: done
    assert progress(move(leader_bytes=0, replica_bytes={4: 0})) == (0.0, 0, 0)  # nothing to copy, not in sync yet
    assert progress(move(leader_bytes=0, isr=(1, 2, 4))) == (1.0, 0, 0)
    assert progress_text(move(adding=())) == "nothing to copy"  # a move that only drops replicas


def test_bar_and_sizes():
    assert bar(0.0) == "[--------------------]   0%"
    assert bar(0.999) == "[###################-]  99%"  # rounded down: 100% only when done
    assert bar(1.0) == "[####################] 100%"
    assert bar(1.7) == bar(1.0) and bar(-1) == bar(0.0)
    assert bar(0.5, width=4) == "[##--]  50%"
    assert [human_bytes(n) for n in (None, 0, 999, 1000, 12_000_000, 26_549_999, 999_960, 1_500_000_000)] == [
        "?", "0 B", "999 B", "1.0 kB", "12.0 MB", "26.5 MB", "1.0 MB", "1.5 GB"]


def test_moves_take_leader_isr_and_sizes_from_each_broker():
    listed = {("t", 0): ((1, 4, 2), (4,), (2,)), ("t", 1): ((3, 2), (3,), ()), ("t", 2): ((5, 1), (5,), (1,))}
    states = {("t", 0): PartitionState(0, 1, (1, 4, 2), (1, 2), ()),
              ("t", 1): PartitionState(1, 2, (3, 2), (2,), ()),
              ("t", 2): PartitionState(2, -1, (5, 1), (1,), (1,))}
    sizes = {1: {("t", 0): 1000}, 4: {}, 2: {("t", 1): 50}, 3: "cannot connect to h:1: Connection refused"}
    moves = build_moves(listed, states, sizes)
    assert moves[("t", 0)].leader_bytes == 1000 and moves[("t", 0)].replica_bytes == {4: 0}  # no log there yet
    assert moves[("t", 0)].unknown == ()
    assert moves[("t", 1)].replica_bytes == {3: None}
    assert moves[("t", 1)].unknown == ("broker 3: cannot connect to h:1: Connection refused",)
    assert moves[("t", 2)].leader_bytes is None and moves[("t", 2)].unknown == ("no leader",)


# -- status from made-up partitions ----------------------------------------------------------------

BROKERS = {1: Broker(1, "10.0.0.1", 9092, "a"), 2: Broker(2, "10.0.0.2", 9092, "b")}
TOPICS = [TopicState("orders", None, False, (
    PartitionState(0, 1, (1, 4, 2), (1, 2), (4,)),  # moving 2 -> 4: not under-replicated (Kafka's rule)
    PartitionState(1, 2, (2, 3), (2,), (3,)),  # under-replicated, under min ISR
    PartitionState(2, -1, (3,), (3,), (3,)),  # offline
))]


def test_status_counts_follow_kafka_topics():
    data = cluster_status("cid", 2, BROKERS, TOPICS, {"orders": 2}, {("orders", 0): move()})
    assert [(b["id"], b["live"], b["controller"], b["replicas"], b["leaders"]) for b in data["brokers"]] == [
        (1, True, False, 1, 1), (2, True, True, 2, 1), (3, False, False, 2, 0), (4, False, False, 1, 0)]
    assert (data["partitions"], data["under_replicated"], data["offline"], data["under_min_isr"]) == (3, 1, 1, 2)
    assert data["under_replicated_partitions"] == ["orders-1"] and data["offline_partitions"] == ["orders-2"]
    assert data["under_min_isr_partitions"] == ["orders-1", "orders-2"]
    [m] = data["reassignments"]
    assert (m["replicas"], m["adding"], m["removing"], m["progress"]) == ([1, 4, 2], [4], [2], 0.4528)
    assert (m["copied_bytes"], m["total_bytes"], m["replica_bytes"]) == (12_000_000, 26_500_000, {"4": 12_000_000})
    json.dumps(data)
    # without the move's adding replicas the moving partition would count as under-replicated
    assert partition_flags(TOPICS[0].partitions[0], {1, 2}, 2)["under_replicated"] is True
    # min.insync.replicas unknown: the count is unknown, not zero
    assert cluster_status("cid", 2, BROKERS, TOPICS, None, {})["under_min_isr"] is None


def test_status_text():
    data = cluster_status("cid", 2, BROKERS, TOPICS, {"orders": 2}, {("orders", 0): move()})
    assert status_text(data).split("\n") == [
        "Cluster: cid  Controller: 2  Brokers: 2 live, 2 offline",
        "BROKER  ADDRESS        RACK  STATE    REPLICAS  LEADERS",
        "1       10.0.0.1:9092  a     live     1         1",
        "2*      10.0.0.2:9092  b     live     2         1",
        "3       -              -     offline  2         0",
        "4       -              -     offline  1         0",
        "Partitions: 3  Under-replicated: 1  Offline: 1  Under-min-ISR: 2",
        "Reassignments in progress: 1",
        "PARTITION  REPLICAS  ADDING  REMOVING  PROGRESS",
        "orders-0   1,4,2     4       2         [#########-----------]  45%  12.0 MB / 26.5 MB",
    ]
    quiet = cluster_status(None, -1, BROKERS, [], None, {})
    assert status_text(quiet).split("\n") == [
        "Cluster: -  Controller: none  Brokers: 2 live",
        "BROKER  ADDRESS        RACK  STATE  REPLICAS  LEADERS",
        "1       10.0.0.1:9092  a     live   0         0",
        "2       10.0.0.2:9092  b     live   0         0",
        "Partitions: 0  Under-replicated: 0  Offline: 0  Under-min-ISR: ?",
        "Reassignments in progress: 0",
    ]


def test_describe_shows_kafkas_adding_and_removing_replicas_and_the_progress():
    views = topic_views(TOPICS, {"orders": []}, BROKERS, [], {("orders", 0): move()})
    lines = describe_text(views, filtered=False).split("\n")
    assert lines[0] == "Topic: orders\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: "  # Kafka: replicas - adding
    assert lines[1] == ("\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,4,2\tIsr: 1,2\tAdding Replicas: 4"
                        "\tRemoving Replicas: 2\tOffline: 4\tProgress: [#########-----------]  45%  12.0 MB / 26.5 MB")
    assert lines[2] == "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2\tOffline: 3"
    under = topic_views(TOPICS, {"orders": []}, BROKERS, ["under_replicated"], {("orders", 0): move()})
    assert [p.partition for p, _ in under[0].partitions] == [1]  # the move is not under-replicated
    [topic] = describe_data(views)
    assert topic["replication_factor"] == 2
    assert topic["partitions"][0]["reassignment"] == {
        "adding": [4], "removing": [2], "progress": 0.4528, "copied_bytes": 12_000_000, "total_bytes": 26_500_000,
        "leader_bytes": 26_500_000, "replica_bytes": {"4": 12_000_000}, "unknown": []}
    assert topic["partitions"][1]["reassignment"] is None


# -- end to end against fake brokers ---------------------------------------------------------------

SERVED = {API_VERSIONS: (0, 4), METADATA: (0, 12), DESCRIBE_CONFIGS: (1, 4), LIST_PARTITION_REASSIGNMENTS: (0, 0),
          DESCRIBE_LOG_DIRS: (1, 4)}


class FakeCluster:
    """Brokers 1 and 2 (2 the controller), 3 offline. 'moving' partition 0 goes from [1,3] to [1,2]
    (replicas 1,2,3, adding 2, removing 3), partition 1 from [1,2] to [3,2] (adding 3: offline);
    partition 2 is still. Broker 1 leads and holds 26.5 MB of partition 0, broker 2 12 MB."""

    def __init__(self, fake, served=SERVED, silent=()):
        self.seen = []
        self.served, self.silent = served, set(silent)
        self.brokers = {1: fake(lambda h, body, port: self.handle(1, h, body)),
                        2: fake(lambda h, body, port: self.handle(2, h, body))}
        self.bootstrap = self.brokers[1].bootstrap

    def handle(self, node, h, body):
        if h.api_key == API_VERSIONS:
            return api_versions(h, self.served)
        self.seen.append((node, h.api_key, h.api_version))
        if h.api_key == METADATA:
            parts = [(0, 1, [1, 2, 3], [1], [3]), (1, 1, [3, 2, 1], [1, 2], [3]), (2, 2, [2, 1], [2, 1], [])]
            return {"brokers": [{"node_id": n, "host": "127.0.0.1", "port": b.port, "rack": "r1" if n == 1 else None}
                                for n, b in self.brokers.items()],
                    "controller_id": 2, "cluster_id": "cid", "topics": [] if body.topics == () else [
                        {"name": "moving", "partitions": [
                            {"partition_index": p, "leader_id": leader, "replica_nodes": r, "isr_nodes": isr,
                             "offline_replicas": off} for p, leader, r, isr, off in parts]}]}
        if h.api_key == DESCRIBE_CONFIGS:
            return {"results": [{"resource_type": 2, "resource_name": r.resource_name, "error_code": 0,
                                 "configs": [{"name": "min.insync.replicas", "value": "2", "config_source": 1}]}
                                for r in body.resources]}
        if h.api_key == LIST_PARTITION_REASSIGNMENTS:
            if node != 2:
                return {"error_code": 41, "topics": []}  # NOT_CONTROLLER
            return {"error_code": 0, "topics": [{"name": "moving", "partitions": [
                {"partition_index": 0, "replicas": [1, 2, 3], "adding_replicas": [2], "removing_replicas": [3]},
                {"partition_index": 1, "replicas": [3, 2, 1], "adding_replicas": [3], "removing_replicas": [1]}]}]}
        if h.api_key == DESCRIBE_LOG_DIRS:
            if node in self.silent:
                return None
            wanted = {(t.topic, int(p)) for t in body.topics for p in t.partitions}
            sizes = {1: {("moving", 0): 26_500_000, ("moving", 1): 5_000_000}, 2: {("moving", 0): 12_000_000}}[node]
            by_topic = {}
            for (t, p), size in sizes.items():
                if (t, p) in wanted:
                    by_topic.setdefault(t, []).append({"partition_index": p, "partition_size": size, "offset_lag": 0,
                                                       "is_future_key": False})
            return {"error_code": 0, "results": [{"error_code": 0, "log_dir": "/data", "topics": [
                {"name": t, "partitions": ps} for t, ps in by_topic.items()]}]}
        raise AssertionError(f"unexpected request {h.api_key}")


@pytest.fixture
def fake():
    brokers = []

    def start(handler):
        b = FakeBroker(handler)
        brokers.append(b)
        return b

    yield start
    for b in brokers:
        b.close()


def test_status_end_to_end(fake, capsys):
    cluster = FakeCluster(fake)
    assert main(["cluster", "status", "--bootstrap-server", cluster.bootstrap]) == 0
    lines = capsys.readouterr().out.split("\n")
    ports = {n: b.port for n, b in cluster.brokers.items()}
    assert lines[0] == "Cluster: cid  Controller: 2  Brokers: 2 live, 1 offline"
    assert lines[2].split() == ["1", f"127.0.0.1:{ports[1]}", "r1", "live", "3", "2"]
    assert lines[3].split() == ["2*", f"127.0.0.1:{ports[2]}", "-", "live", "3", "1"]
    assert lines[4].split() == ["3", "-", "-", "offline", "2", "0"]
    # 0: ISR [1] < 3 - 1 (under-replicated, under min ISR); 1: ISR [1,2] = 3 - 1 (not under-replicated)
    assert lines[5] == "Partitions: 3  Under-replicated: 1  Offline: 0  Under-min-ISR: 1"
    assert lines[6:9] == [
        "Reassignments in progress: 2",
        "PARTITION  REPLICAS  ADDING  REMOVING  PROGRESS",
        "moving-0   1,2,3     2       3         [#########-----------]  45%  12.0 MB / 26.5 MB"]
    assert lines[9] == "moving-1   3,2,1     3       1         [????????????????????]    ?  ? / 5.0 MB  (broker 3: offline)"
    # each broker was asked for its own logs; the list of moves came from the controller
    assert {(n, k) for n, k, _v in cluster.seen if k in (DESCRIBE_LOG_DIRS, LIST_PARTITION_REASSIGNMENTS)} == {
        (1, DESCRIBE_LOG_DIRS), (2, DESCRIBE_LOG_DIRS), (2, LIST_PARTITION_REASSIGNMENTS)}
    assert {v for _n, k, v in cluster.seen if k == DESCRIBE_LOG_DIRS} == {4}

    assert main(["cluster", "status", "--json", "--bootstrap-server", cluster.bootstrap]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["cluster_id"], data["controller"], data["under_replicated_partitions"]) == ("cid", 2, ["moving-0"])
    assert [(m["topic"], m["partition"], m["progress"]) for m in data["reassignments"]] == [
        ("moving", 0, 0.4528), ("moving", 1, None)]


def test_describe_end_to_end_with_moves(fake, capsys):
    cluster = FakeCluster(fake)
    assert main(["topics", "describe", "--topic", "moving", "--bootstrap-server", cluster.bootstrap]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert lines[0] == "Topic: moving\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: min.insync.replicas=2"
    assert lines[1] == ("\tTopic: moving\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1\tAdding Replicas: 2"
                        "\tRemoving Replicas: 3\tOffline: 3\tProgress: [#########-----------]  45%  12.0 MB / 26.5 MB")
    assert lines[3] == "\tTopic: moving\tPartition: 2\tLeader: 2\tReplicas: 2,1\tIsr: 2,1\tOffline: "


def test_a_broker_without_reassignments_shows_none(fake, capsys):
    """kbroker's single node (and any broker that does not serve ListPartitionReassignments)."""
    cluster = FakeCluster(fake, served={k: v for k, v in SERVED.items() if k != LIST_PARTITION_REASSIGNMENTS})
    assert main(["topics", "describe", "--topic", "moving", "--bootstrap-server", cluster.bootstrap]) == 0
    assert "Adding Replicas" not in capsys.readouterr().out
    assert main(["cluster", "status", "--bootstrap-server", cluster.bootstrap]) == 0
    assert "Reassignments in progress: 0" in capsys.readouterr().out
    assert not [k for _n, k, _v in cluster.seen if k in (DESCRIBE_LOG_DIRS, LIST_PARTITION_REASSIGNMENTS)]


def test_a_silent_broker_makes_its_sizes_unknown_not_the_command_slow(fake):
    cluster = FakeCluster(fake, silent={2})
    brokers = {n: Broker(n, "127.0.0.1", b.port) for n, b in cluster.brokers.items()}
    started = time.monotonic()
    sizes = partition_sizes(brokers, {1: [("moving", 0)], 2: [("moving", 0)], 3: [("moving", 1)]}, timeout=0.5)
    assert time.monotonic() - started < 3
    assert sizes[1] == {("moving", 0): 26_500_000}
    assert "timed out" in sizes[2] and sizes[3] == "offline"


def test_a_client_not_allowed_to_list_moves_sees_none(fake, capsys):
    """As kafka-topics: CLUSTER_AUTHORIZATION_FAILED from ListPartitionReassignments means no moves shown."""
    cluster = FakeCluster(fake)
    handle = cluster.handle
    cluster.handle = lambda node, h, body: ({"error_code": 31, "topics": []} if h.api_key == LIST_PARTITION_REASSIGNMENTS
                                            else handle(node, h, body))
    assert main(["topics", "describe", "--topic", "moving", "--bootstrap-server", cluster.bootstrap]) == 0
    assert "Adding Replicas" not in capsys.readouterr().out
