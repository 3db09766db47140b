"""The remote log manager over a real Log and the real directory store, with a settable clock: what
a round archives, what local retention may then delete, reads and timestamps from the archive,
read_committed's aborted transactions, the archive's retention, a restart, and what a crash in
the middle of a copy leaves (ignored, then removed after the grace time)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from kbroker.config import BrokerConfig
from kbroker.errors import OffsetOutOfRangeError
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.topic_partition import TopicPartition
from kbroker.tiered.manager import RemoteLogManager
from kbroker.tiered.store import DirectoryRemoteStorageManager
from kbroker.wire.control import ABORT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.records import Record, build_batch, decode_records, iter_batch_headers, validate_batches

HOUR = 3_600_000


class Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


@dataclass
class FakePartition:
    """What the manager reads of a replica layer Partition."""

    log: Log
    topic_partition: TopicPartition = TopicPartition("t", 0)
    topic_id: uuid.UUID = uuid.UUID(int=7)
    is_leader: bool = True
    leader_epoch: int = 0

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset


def _append(log: Log, n: int, ts: int, *, pid: int = -1, txn: bool = False, seq: int = -1) -> None:
    start = log.log_end_offset
    records = [Record(i, ts + i, b"k%d" % (start + i), b"v%d" % (start + i) + b"x" * 200, []) for i in range(n)]
    buf = bytearray(build_batch(records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                base_sequence=seq, is_transactional=txn))
    log.append_as_leader(buf, validate_batches(buf), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)


@pytest.fixture
def setup(tmp_path: Path):
    clock = Clock(time.time_ns() // 1_000_000)  # leftovers are aged by their files' mtimes
    config = LogConfig(segment_bytes=1500, remote_storage_enable=True, local_retention_ms=1000,
                       retention_ms=5 * HOUR, file_delete_delay_ms=0)
    log = Log.open(tmp_path / "data" / "t-0", config, now_ms=clock)
    partition = FakePartition(log)
    broker = BrokerConfig.from_dict({"remote.log.manager.task.interval.ms": "100"})

    def manager() -> RemoteLogManager:
        return RemoteLogManager(broker, DirectoryRemoteStorageManager({"dir": str(tmp_path / "archive")}),
                                lambda: [partition], clock)

    return clock, log, partition, manager, tmp_path / "archive" / f"t-{partition.topic_id}" / "0"


def _records(info) -> list[Record]:
    data = info.read_bytes()
    return [r for pos, h in iter_batch_headers(data) for r in decode_records(data, pos, h)]


def test_a_round_archives_closed_segments_and_only_then_may_local_retention_delete(setup):
    clock, log, partition, manager, archive = setup
    for i in range(30):
        _append(log, 2, ts=clock.ms - 2 * HOUR + i)
    closed = len(log.segments) - 1
    assert closed >= 3
    assert log.delete_old_segments() == 0, "nothing archived yet: local retention keeps everything"
    rlm = manager()
    trio.run(rlm.run_once)
    assert log.highest_offset_in_remote_storage == log.segments[-1].base_offset - 1
    assert len(list(archive.glob("*.log"))) == closed
    assert log.delete_old_segments() == closed
    assert rlm.log_start_offset(partition) == 0 and log.log_start_offset == log.segments[0].base_offset

    async def reads():
        info = await rlm.read(partition, 3, 1200, True, False)
        first = _records(info)
        assert first[0].offset == 2 and 400 < info.size <= 1200  # the batch holding 3, then whole batches
        assert len(_records(await rlm.read(partition, 3, 10, True, False))) == 2  # KIP-74: one batch anyway
        assert (await rlm.read(partition, 3, 10, False, False)).records == []
        assert [r.value for r in first] == [b"v%d" % r.offset + b"x" * 200 for r in first]
        found = await rlm.find_offset_by_timestamp(partition, clock.ms - 2 * HOUR + 5)
        assert found == (9, clock.ms - 2 * HOUR + 5)  # batch i's records are stamped base + i + j
        assert await rlm.max_timestamp_and_offset(partition) is not None
        return info

    trio.run(reads)
    # a restarted broker: a fresh manager loads the manifest and serves the same
    again = manager()
    trio.run(again.run_once)
    assert trio.run(again.read, partition, 0, 10_000, True, False).records
    rlm.close()
    again.close()


def test_read_committed_from_the_archive_gets_the_aborted_transactions(setup):
    clock, log, partition, manager, _archive = setup
    ts = clock.ms - 2 * HOUR
    _append(log, 2, ts)
    _append(log, 3, ts, pid=5, txn=True, seq=0)  # offsets 2-4, aborted below
    _append(log, 2, ts)
    marker = bytearray(build_end_txn_marker_batch(EndTransactionMarker(ABORT, 0), producer_id=5, producer_epoch=0,
                                                  timestamp=ts))
    log.append_as_leader(marker, validate_batches(marker, from_client=False), leader_epoch=0, from_client=False)
    log.update_high_watermark(log.log_end_offset)
    for i in range(10):
        _append(log, 2, ts + i)
    rlm = manager()
    trio.run(rlm.run_once)
    log.delete_old_segments()
    assert log.log_start_offset > 7
    info = trio.run(rlm.read, partition, 0, 100_000, True, True)
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(5, 2)]
    later = trio.run(rlm.read, partition, 8, 100_000, True, True)
    assert later.aborted_transactions == []
    rlm.close()


def test_the_archives_retention_and_delete_records(setup):
    clock, log, partition, manager, archive = setup
    for i in range(30):
        _append(log, 2, ts=clock.ms - 2 * HOUR + i)
    rlm = manager()
    trio.run(rlm.run_once)
    log.delete_old_segments()
    trio.run(rlm.advance_log_start_offset, partition, 5)
    assert rlm.log_start_offset(partition) == 5
    with pytest.raises(OffsetOutOfRangeError):
        trio.run(rlm.read, partition, 4, 1000, True, False)
    clock.ms += 4 * HOUR  # past retention.ms = 5 h for every record
    trio.run(rlm.run_once)
    assert rlm.log_start_offset(partition) == log.log_start_offset
    assert list(archive.glob("*.log")) == []
    rlm.close()


def test_a_torn_copy_is_ignored_then_removed_after_the_grace_time(setup):
    clock, log, partition, manager, archive = setup
    for i in range(12):
        _append(log, 2, ts=clock.ms - 2 * HOUR + i)
    rlm = manager()
    trio.run(rlm.run_once)
    torn = [archive / f"{40:020d}-{'cd' * 16}.log.tmp", archive / f"{41:020d}-{'ef' * 16}.index",
            archive / "manifest.json.tmp"]
    for path in torn:
        path.write_bytes(b"\x00torn")
    restarted = manager()  # the next leadership (a restart) sweeps; young leftovers are left alone
    trio.run(restarted.run_once)
    assert all(p.exists() for p in torn)
    assert trio.run(restarted.read, partition, 0, 10_000, True, False).records
    clock.ms += 2 * restarted.orphan_grace_ms
    older = manager()
    trio.run(older.run_once)
    assert not any(p.exists() for p in torn)
    assert len(list(archive.glob("*.log"))) == len(log.segments) - 1  # what the manifest names stays
    for m in (rlm, restarted, older):
        m.close()
