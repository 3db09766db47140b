"""Failures in a three-broker cluster (real ZooKeeper, real kbroker processes), each ending with the
data check: every record an idempotent acks=all producer had acknowledged is read back exactly
once, at its offset, in order per partition.

- the leader of each partition in turn is kill -9'ed and restarted under load; the restarted
  broker catches up and rejoins the ISR;
- the leader is paused (SIGSTOP) past its ZooKeeper session, a new leader takes over, the old one
  resumes, steps down, truncates to the new leader's log and rejoins;
- with two of three replicas gone acks=all is refused (NOT_ENOUGH_REPLICAS) while acks=1 works;
  with the whole ISR gone and unclean election off the partition stays offline until an ISR
  member returns, and nothing acknowledged is lost;
- kill -9 of the controller: another broker takes over and topics can still be created;
- SIGTERM does a controlled shutdown: leaderships move before the broker exits.
"""

from __future__ import annotations

import time

import pytest

import clusterkit as ck

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def cluster(tmp_path):
    c = ck.start_cluster(tmp_path / "cluster", 3)
    yield c
    ck.stop_cluster(c)


def _isr_full(cluster, topic, partitions=3):
    parts = ck.partitions(cluster, topic)
    return len(parts) == partitions and all(len(p["isr"]) == 3 and p["leader"] >= 0 for p in parts.values())


KILL_ROUNDS = 3


def test_leader_kill9_and_restart_of_each_partition_loses_nothing(cluster):
    """Three rounds, one per partition: kill -9 the partition's current leader under load, wait for a
    new leader and for produce to go on, start the broker again, wait for it back in every ISR.
    (It was five rounds; the fourth and fifth killed the leaders of partitions 0 and 1 again, the
    same path with nothing new to prove, at ~15 s a round. The Java producer's version of this test,
    test_cluster_java.py, also kills three times.)"""
    ck.create_topic(cluster, "kills", 3, 3, {"min.insync.replicas": "2"})
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), "kills").start()
    try:
        for round_ in range(KILL_ROUNDS):
            ck.wait_for(lambda: producer.acked_count > 200 * (round_ + 1), 60, "acknowledgements before a kill")
            victim = ck.leader_of(cluster, "kills", round_ % 3)
            acked_before = producer.acked_count
            cluster.brokers[victim].kill()
            ck.wait_for(lambda: ck.leader_of(cluster, "kills", round_ % 3) not in (-1, victim), 30,
                        f"a new leader after killing broker {victim}")
            ck.wait_for(lambda: producer.acked_count > acked_before + 100, 60, "produce goes on after the kill")
            cluster.brokers[victim].start()
            ck.wait_for(lambda: _isr_full(cluster, "kills"), 60, f"broker {victim} back in every ISR")
    finally:
        producer.stop()
    assert producer.failed == []
    assert producer.acked_count > 1000
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), "kills", 3))


def test_paused_leader_steps_down_and_truncates(cluster):
    ck.create_topic(cluster, "paused", 1, 3, {"min.insync.replicas": "2"})
    # a paused broker never answers: the client only moves on when its request times out
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), "paused", **{
        "socket.timeout.ms": 8000, "request.timeout.ms": 8000}).start()
    try:
        ck.wait_for(lambda: producer.acked_count > 300, 60, "acknowledgements before the pause")
        old = ck.leader_of(cluster, "paused")
        cluster.brokers[old].pause()
        paused_at = time.monotonic()
        ck.wait_for(lambda: ck.leader_of(cluster, "paused") not in (-1, old), ck.SESSION_MS / 1000 + 20,
                    "a new leader while the old one is paused")
        assert time.monotonic() - paused_at <= ck.SESSION_MS / 1000 + 10
        new = ck.leader_of(cluster, "paused")
        acked_before = producer.acked_count
        ck.wait_for(lambda: producer.acked_count > acked_before + 300, 60, "produce through the new leader")
        cluster.brokers[old].resume()
        # asked of the new leader: the old one answers from a stale cache until the controller reaches it
        ck.wait_for(lambda: old in ck.partitions(cluster, "paused", via=new)[0]["isr"], 60,
                    f"broker {old} resumed, following and back in the ISR")
        ck.wait_for(lambda: ck.partitions(cluster, "paused", via=old)[0]["leader"] == new, 30,
                    f"broker {old} knows broker {new} leads")
    finally:
        producer.stop()
    assert producer.failed == []
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), "paused", 1))
    # the old leader's copy now equals the leader's: lead with it alone and read everything again
    for broker_id in (1, 2, 3):
        if broker_id != old:
            cluster.brokers[broker_id].stop()
    ck.wait_for(lambda: ck.leader_of(cluster, "paused") == old, 40, f"broker {old} leads after the others stopped")
    read = ck.read_all(cluster.brokers[old].address, "paused", 1)
    ck.check_exactly_once_in_order(producer.acked, read)
    assert new != old


def test_min_insync_replicas_and_an_offline_partition(cluster):
    from confluent_kafka import KafkaError, Producer

    ck.create_topic(cluster, "minisr", 1, 3, {"min.insync.replicas": "2"})
    leader = ck.leader_of(cluster, "minisr")
    followers = [b for b in (1, 2, 3) if b != leader]
    acked = ck.AckedProducer(cluster.brokers[leader].address, "minisr")
    for i in range(50):
        acked.producer.produce("minisr", value=f"before-{i}".encode(), on_delivery=acked._delivered)
    acked.producer.flush(30)
    assert acked.acked_count == 50 and not acked.failed
    for b in followers:
        cluster.brokers[b].kill()
    ck.wait_for(lambda: ck.partitions(cluster, "minisr")[0]["isr"] == [leader], ck.SESSION_MS / 1000 + 20,
                "the ISR shrunk to the leader alone")

    def send(acks: str):
        errors = []
        p = Producer({"bootstrap.servers": cluster.brokers[leader].address, "acks": acks, "retries": 0,
                      "message.timeout.ms": 5000, "enable.idempotence": False})
        p.produce("minisr", value=b"x", on_delivery=lambda err, msg: errors.append(err))
        p.flush(20)
        return errors

    assert [e.code() for e in send("all")] == [KafkaError.NOT_ENOUGH_REPLICAS]
    assert send("1") == [None]
    # the whole ISR gone, unclean election off: the partition is offline, not led by a stale replica
    cluster.brokers[leader].kill()
    cluster.brokers[followers[0]].start()
    ck.wait_for(lambda: ck.partitions(cluster, "minisr").get(0, {}).get("leader") == -1, 30,
                "the partition offline with its whole ISR gone")
    time.sleep(2)  # a stale replica must not be elected, however long we wait
    assert ck.partitions(cluster, "minisr")[0]["leader"] == -1
    cluster.brokers[leader].start()
    ck.wait_for(lambda: ck.leader_of(cluster, "minisr") == leader, 30, "the last ISR member leads again")
    read = ck.read_all(ck.live_bootstrap(cluster), "minisr", 1)
    ck.check_exactly_once_in_order(acked.acked, read)
    assert [v for _, v in read[0]][-1] == b"x"  # the acks=1 record survived too: its leader came back


def test_controller_kill9_a_new_controller_and_topics_still_created(cluster):
    from kbroker.admin.client import AdminClient

    def controller_id(via):
        with AdminClient(cluster.brokers[via].address, timeout=5) as admin:
            return admin._any().call(60, {"include_cluster_authorized_operations": False}, version=1).controller_id

    ck.create_topic(cluster, "before", 3, 3)
    old = controller_id(1)
    assert old in (1, 2, 3)
    killed_at = time.monotonic()
    cluster.brokers[old].kill()
    others = [b for b in (1, 2, 3) if b != old]
    new = ck.wait_for(lambda: (lambda c: c if c not in (-1, old) else None)(controller_id(others[0])),
                      ck.SESSION_MS / 1000 + 10, "a new controller")
    assert time.monotonic() - killed_at <= ck.SESSION_MS / 1000 + 5
    # the other survivor learns it too (its UpdateMetadata may come a moment after the first one's)
    ck.wait_for(lambda: controller_id(others[1]) == new, 10, f"broker {others[1]} to name controller {new}")
    with AdminClient(",".join(cluster.brokers[b].address for b in others), timeout=30) as admin:
        admin.create_topic("after", partitions=4, replication_factor=2)
    ck.wait_for(lambda: len(ck.partitions(cluster, "after")) == 4 and all(
        p["leader"] in others for p in ck.partitions(cluster, "after").values()), 20, "the new topic online")
    ck.wait_for(lambda: all(p["leader"] in others for p in ck.partitions(cluster, "before").values()), 20,
                "every partition led by a live broker")


def test_controlled_shutdown_moves_leaders_before_exit(cluster):
    ck.create_topic(cluster, "handover", 6, 3, {"min.insync.replicas": "2"})
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), "handover").start()
    try:
        ck.wait_for(lambda: producer.acked_count > 500, 60, "acknowledgements before the shutdown")
        led = [p for p, s in ck.partitions(cluster, "handover").items() if s["leader"] == 2]
        assert led, "broker 2 leads some partitions"
        broker = cluster.brokers[2]
        broker.proc.terminate()
        assert broker.proc.wait(60) == 0
        controller_logs = "".join(b.log_tail(200000) for b in cluster.brokers.values())  # it may be the controller
        assert "controlled shutdown of broker 2 moved" in controller_logs and ", 0 remain" in controller_logs
        assert "controlled shutdown complete" in broker.log_tail(20000)
        parts = ck.partitions(cluster, "handover")
        assert all(parts[p]["leader"] in (1, 3) for p in led), parts
        acked_before = producer.acked_count
        ck.wait_for(lambda: producer.acked_count > acked_before + 300, 60, "produce goes on")
    finally:
        producer.stop()
    assert producer.failed == []
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), "handover", 6))


def test_topic_deleted_while_a_replica_is_down_leaves_no_stray_log(cluster):
    from kbroker.admin.client import AdminClient

    ck.create_topic(cluster, "gone", 2, 3)
    ck.create_topic(cluster, "kept", 1, 3)
    down = cluster.brokers[3]
    down.kill()
    others = ",".join(cluster.brokers[b].address for b in (1, 2))
    with AdminClient(others, timeout=30) as admin:
        assert admin.delete_topics(["gone"]) == {"gone": None}
    ck.wait_for(lambda: ck.partitions(cluster, "gone", via=1) == {}, 20, "gone deleted")
    assert sorted(p.name for p in (down.data_dir / "data").glob("gone-*")) == ["gone-0", "gone-1"]
    down.start()
    ck.wait_for(lambda: not [p for p in (down.data_dir / "data").glob("gone-*") if not p.name.endswith("-delete")],
                30, "the returning broker drops its stray logs of the deleted topic")
    ck.wait_for(lambda: 3 in ck.partitions(cluster, "kept", via=1)[0]["isr"], 30, "kept's replica back in sync")
    assert (down.data_dir / "data" / "kept-0").is_dir()


def test_answers_keep_request_order_while_acks_all_waits(cluster):
    """An acks=all answer waits for the ISR while the connection reads on (the next produce is
    appended meanwhile): the answers still leave in request order, with the right offsets."""
    import socket
    import struct

    from kbroker.wire.protocol import decode_response, encode_request
    from kbroker.wire.records import Record, build_batch

    ck.create_topic(cluster, "ordered", 1, 2)
    leader = ck.leader_of(cluster, "ordered")
    follower = next(b for b in ck.partitions(cluster, "ordered")[0]["replicas"] if b != leader)

    def produce(acks: int, value: bytes) -> dict:
        batch = build_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None, value=value, headers=())])
        return {"transactional_id": None, "acks": acks, "timeout": 30000,
                "topic_data": [{"name": "ordered", "partition_data": [{"index": 0, "records": batch}]}]}

    requests = [(0, 9, produce(-1, b"first")), (3, 12, {"topics": [{"name": "ordered", "topic_id": None}],
                                                         "allow_auto_topic_creation": False,
                                                         "include_topic_authorized_operations": False}),
                (0, 9, produce(1, b"second"))]
    cluster.brokers[follower].pause()  # the ISR cannot grow past the leader until it shrinks
    try:
        host, port = cluster.brokers[leader].address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=60) as s:
            t0 = time.monotonic()
            s.sendall(b"".join(encode_request(key, version, corr, "order-test", body)
                               for corr, (key, version, body) in enumerate(requests, 1)))
            answers = []
            stream = s.makefile("rb")
            for key, version, _ in requests:
                size = struct.unpack(">i", stream.read(4))[0]
                answers.append((time.monotonic() - t0, *decode_response(key, version, stream.read(size))))
    finally:
        cluster.brokers[follower].resume()
    assert [corr for _, corr, _ in answers] == [1, 2, 3]
    first, second = answers[0][2].responses[0].partition_responses[0], answers[2][2].responses[0].partition_responses[0]
    assert (first.error_code, first.base_offset) == (0, 0)
    assert (second.error_code, second.base_offset) == (0, 1)
    # the acks=all answer came only after the ISR shrank, and nothing behind it overtook it
    assert answers[0][0] >= 2.0
    ck.wait_for(lambda: sorted(ck.partitions(cluster, "ordered")[0]["isr"]) == sorted([leader, follower]), 60,
                "the resumed follower back in the ISR")
    read = ck.read_all(ck.live_bootstrap(cluster), "ordered", 1)
    assert [v for _, v in read[0]] == [b"first", b"second"]
