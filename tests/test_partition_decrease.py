"""Partition decrease's pure parts: the producers' default partitioners the drain routes by, the
topic znode's `active_partitions`, and the UpdateMetadata that hides retired partitions (while
LeaderAndIsr still carries them: they stay led and replicated)."""

from __future__ import annotations

import zlib

from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kbroker.controller import broker_requests as req
from kbroker.controller.context import LEADER_DURING_DELETE, ControllerContext
from kbroker.partitioners import murmur2, target_partition
from kbroker.wire.protocol import decode_request, encode_request, parse_request_header
from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.znodes import BrokerRegistration, LeaderAndIsr, TopicAssignment


def test_murmur2_matches_kafkas_own_test_vectors():
    # Kafka's UtilsTest.testMurmur2
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


@given(st.binary(max_size=64))
def test_murmur2_is_kafka_pythons(key):
    assert murmur2(key) & 0x7FFFFFFF == kafka_python_murmur2(bytearray(key)) & 0x7FFFFFFF


@given(st.binary(min_size=1, max_size=32), st.integers(0, 11), st.integers(1, 12))
def test_keyed_records_go_where_the_default_partitioner_puts_the_key(key, source, count):
    assert target_partition(key, source, count) == (murmur2(key) & 0x7FFFFFFF) % count
    assert target_partition(key, source, count, "consistent_random") == zlib.crc32(key) % count
    assert target_partition(None, source, count) == source % count


def test_a_key_of_a_surviving_partition_stays_when_the_count_halves():
    """6 -> 3: a key in partitions 0-2 keeps its partition, 3-5 map to 0-2 (x % 6 % 3 == x % 3)."""
    for i in range(500):
        key = f"k{i}".encode()
        for partitioner in ("murmur2", "consistent_random"):
            six = target_partition(key, 0, 6, partitioner)
            assert target_partition(key, 0, 3, partitioner) == six % 3


def test_the_topic_znode_keeps_the_active_count():
    t = TopicAssignment("t", None, {p: [1, 2] for p in range(6)}, active=3)
    back = zk.decode_topic("t", zk.encode_topic(t))
    assert back.active == 3 and back.is_retiring(3) and back.is_retiring(5) and not back.is_retiring(2)
    marked = zk.decode_topic("t", zk.encode_topic(TopicAssignment("t", None, {p: [1] for p in range(4)}, active=2,
                                                                   removable=(3, 2))))
    assert marked.removable == (2, 3) and marked.active == 2
    plain = zk.decode_topic("t", zk.encode_topic(TopicAssignment("t", None, {0: [1]})))
    assert plain.active is None and not plain.is_retiring(0) and b"active_partitions" not in zk.encode_topic(plain)
    assert plain.removable == () and b"removable_partitions" not in zk.encode_topic(plain)


def test_update_metadata_hides_retired_partitions_and_leader_and_isr_keeps_them():
    ctx = ControllerContext(epoch=2, epoch_zk_version=1)
    ctx.live_brokers = {b: BrokerRegistration(b, "h", 9000 + b, epoch=b) for b in (1, 2)}
    ctx.topics = {"t": TopicAssignment("t", None, {p: [1, 2] for p in range(4)}, active=2)}
    ctx.states = {("t", p): LeaderAndIsr(1, 3, (1, 2), 2, 5) for p in range(4)}
    parts = ctx.all_partitions()

    def wire(api_key, body):
        frame = encode_request(api_key, req.VERSIONS[api_key], 1, "c", body)
        header, offset = parse_request_header(frame[4:])
        return decode_request(header, frame[4:], offset)

    um = wire(req.UPDATE_METADATA, req.update_metadata(ctx, 1, ctx.live_brokers[2], parts, full=True))
    leaders = {p.partition_index: p.leader for t in um.topic_states for p in t.partition_states}
    assert leaders == {0: 1, 1: 1, 2: LEADER_DURING_DELETE, 3: LEADER_DURING_DELETE}
    lai = wire(req.LEADER_AND_ISR, req.leader_and_isr(ctx, 1, ctx.live_brokers[2], parts))
    assert sorted(p.partition_index for t in lai.topic_states for p in t.partition_states) == [0, 1, 2, 3]


# ---- the explicit request (issue 22, item 3): never CreatePartitions ------------------------------


class _FakeAdmin:
    """What `shrink.decrease` asks of the admin client, recorded."""

    timeout, security = 5.0, None

    def __init__(self, partitions: int) -> None:
        from types import SimpleNamespace

        self.topic = SimpleNamespace(partitions=[SimpleNamespace(partition=p) for p in range(partitions)])
        self.calls: list = []

    def describe_topics(self, topics):
        return {}, [self.topic]

    def alter_topic_configs(self, name, set_configs, delete_configs):
        self.calls.append(("IncrementalAlterConfigs", name, dict(set_configs), list(delete_configs)))

    def create_partitions(self, name, count):
        self.calls.append(("CreatePartitions", name, count))

    def committed_offsets(self, group):
        return {("t", 2): 10, ("t", 3): 20}


def test_the_decrease_is_one_incremental_alter_configs_of_partitions_retire_from(monkeypatch):
    from kbroker.admin import shrink

    monkeypatch.setattr(shrink, "_wait_everyone_lists", lambda *a, **k: None)
    ends = {2: 10, 3: 20}
    monkeypatch.setattr(shrink, "_leader_and_end", lambda admin, brokers, topic, p, deadline:
                        (None, ends[p]) if p in ends else None)
    admin = _FakeAdmin(4)
    assert shrink.decrease(admin, "t", 2, partitioner="consistent_random") == {2: 10, 3: 20}
    assert admin.calls == [("IncrementalAlterConfigs", "t", {"retired.records.partitioner": "consistent_random",
                                                             "partitions.retire.from": "2"}, [])]
    admin = _FakeAdmin(4)
    shrink.decrease(admin, "t", 2)
    assert admin.calls == [("IncrementalAlterConfigs", "t", {"partitions.retire.from": "2"}, [])]
    again = _FakeAdmin(2)  # run again after the decrease (Metadata lists 2): no request, only the wait
    shrink.decrease(again, "t", 2)
    assert again.calls == []


def test_the_wait_for_every_broker_to_list_the_count_skips_a_broker_that_is_down():
    """A broker killed while the command waits (its leader's drain moves on without it) must not
    hold the command until its deadline: it learns the count when it comes back."""
    import socket
    import time

    from kbroker.admin import shrink
    from kbroker.admin.values import Broker

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    shrink._wait_everyone_lists({7: Broker(7, "127.0.0.1", port)}, "t", 2, 5.0, started + 30)
    assert time.monotonic() - started < 5
