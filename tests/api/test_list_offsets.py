"""ListOffsets answers of one partition (`list_offsets.lookup`) on a real Log: earliest, latest
(the high watermark, or the last stable offset for read_committed), by timestamp and max
timestamp, none of them beyond what a consumer may read; and Kafka's OFFSET_NOT_AVAILABLE from a
leader just elected whose high watermark is still behind the start of its epoch, until its
followers have fetched. The leader epoch each answer carries (`answered_epoch`): Kafka's."""

from __future__ import annotations

import uuid

import pytest

from kbroker.api.list_offsets import EARLIEST, LATEST, LATEST_TIERED, MAX_TIMESTAMP, answered_epoch, lookup
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.partition import NO_LEADER, Partition
from kbroker.wire.records import Record, build_batch, validate_batches

TP = TopicPartition("orders", 0)
ME = 1
T0 = 1_000_000
TS = 1_700_000_000_000  # record i has timestamp TS + 10 * i


@pytest.fixture
def partition(tmp_path):
    log = Log.open(tmp_path / "orders-0", LogConfig(), now_ms=lambda: T0)
    p = Partition(TP, log, uuid.uuid4(), [1, 2, 3], ME, lambda tp: None)
    p.leader_id, p.leader_epoch = NO_LEADER, -1
    yield p
    log.close()


def append(p: Partition, first: int, n: int) -> None:
    """Records first .. first+n-1 in one batch (several records: lookups land inside it)."""
    records = [Record(i, TS + 10 * (first + i), None, b"v%d" % (first + i), []) for i in range(n)]
    buf = bytearray(build_batch(records))
    p.append_records_to_leader(buf, validate_batches(buf), 1)


def answers(p: Partition, read_committed: bool = False) -> dict:
    out = {}
    for name, spec in (("earliest", EARLIEST), ("latest", LATEST), ("max", MAX_TIMESTAMP), ("ts-of-2", TS + 20),
                       ("ts-of-6", TS + 60), ("past", TS + 10_000)):
        try:
            out[name] = lookup(p, spec, read_committed)
        except KafkaError as exc:
            out[name] = error_code_of(exc)
    return out


def test_answers_stop_at_the_high_watermark(partition):
    p = partition
    p.make_leader(1, [1, 2], [1, 2, 3], 0, T0)
    append(p, 0, 5)
    p.update_follower_fetch(2, 3, T0)  # the ISR has 0..2: HW 3
    assert p.high_watermark == 3
    assert answers(p) == {"earliest": (-1, 0), "latest": (-1, 3), "max": (-1, -1), "ts-of-2": (TS + 20, 2),
                          "ts-of-6": (-1, -1), "past": (-1, -1)}
    p.update_follower_fetch(2, 5, T0)
    assert answers(p)["latest"] == (-1, 5) and answers(p)["max"] == (TS + 40, 4)


def test_new_leader_behind_its_epoch_start_answers_offset_not_available(partition):
    p = partition
    p.make_leader(1, [1, 2], [1, 2, 3], 0, T0)
    append(p, 0, 5)
    p.update_follower_fetch(2, 5, T0)  # HW 5
    append(p, 5, 3)  # 5..7 not yet on broker 2: HW stays 5
    assert (p.high_watermark, p.log_end_offset) == (5, 8)
    # broker 2 led epoch 2 meanwhile; now this broker leads epoch 3 from its log end, and has not
    # heard from its followers: its high watermark may be behind what the old leader answered
    p.make_follower(2, 2, [2, 1], [1, 2, 3], 1)
    p.make_leader(3, [1, 2], [1, 2, 3], 2, T0)
    assert (p.high_watermark, p.leader_epoch_start_offset) == (5, 8)
    unavailable = ErrorCode.offset_not_available
    assert answers(p) == {"earliest": (-1, 0), "latest": unavailable, "max": unavailable,
                          "ts-of-2": (TS + 20, 2), "ts-of-6": unavailable, "past": unavailable}
    assert answers(p, read_committed=True)["latest"] == unavailable
    p.update_follower_fetch(2, 8, T0 + 1)  # the follower has everything: HW 8, past the epoch start
    assert answers(p) == {"earliest": (-1, 0), "latest": (-1, 8), "max": (TS + 70, 7), "ts-of-2": (TS + 20, 2),
                          "ts-of-6": (TS + 60, 6), "past": (-1, -1)}


def test_answered_leader_epochs_are_kafkas(partition):
    """Latest carries the current epoch; earliest, a timestamp and the max timestamp the epoch their
    record was written in; no offset (past the end, latest-tiered without tiered storage) -1, as
    Kafka 4 answers kafka-clients 4.3 (a lookup past the end once answered the current epoch)."""
    p = partition
    p.make_leader(1, [1, 2], [1, 2, 3], 0, T0)
    append(p, 0, 5)
    p.update_follower_fetch(2, 5, T0)
    p.make_follower(2, 2, [2, 1], [1, 2, 3], 1)
    p.make_leader(3, [1, 2], [1, 2, 3], 2, T0)
    append(p, 5, 3)
    p.update_follower_fetch(2, 8, T0)
    assert p.high_watermark == 8

    def epoch(spec):
        return answered_epoch(p, spec, lookup(p, spec, False)[1])

    assert {name: epoch(spec) for name, spec in (
        ("earliest", EARLIEST), ("latest", LATEST), ("max", MAX_TIMESTAMP), ("ts-of-2", TS + 20),
        ("ts-of-6", TS + 60), ("past", TS + 10_000), ("latest-tiered", LATEST_TIERED))} == {
        "earliest": 1, "latest": 3, "max": 3, "ts-of-2": 1, "ts-of-6": 3, "past": -1, "latest-tiered": -1}
