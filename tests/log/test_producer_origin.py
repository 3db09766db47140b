"""A coordinator's append (transaction markers, transactional offset commits) has its producer
epoch checked but no sequence: Kafka's AppendOrigin.COORDINATOR."""

import pytest

from kbroker.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from kbroker.log.log import Log
from kbroker.log.config import LogConfig
from kbroker.wire.records import Record, build_batch, validate_batches


def _batch(pid: int, epoch: int, seq: int, transactional: bool = False) -> bytearray:
    return bytearray(build_batch([Record(0, 1000, b"k", b"v")], producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, is_transactional=transactional))


def _append(log: Log, buf: bytearray, from_client: bool):
    return log.append_as_leader(buf, validate_batches(buf, from_client=from_client), leader_epoch=0,
                                from_client=from_client)


def test_coordinator_appends_skip_sequences_but_check_epochs(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), now_ms=lambda: 1000)
    _append(log, _batch(7, 1, 0, True), from_client=False)
    # the same sequence again is no duplicate for a coordinator, and any sequence is accepted
    second = _append(log, _batch(7, 1, 0, True), from_client=False)
    assert second.first_offset == 1 and not second.duplicate
    _append(log, _batch(7, 1, 42, True), from_client=False)
    assert log.log_end_offset == 3
    with pytest.raises(InvalidProducerEpochError):
        _append(log, _batch(7, 0, 0, True), from_client=False)
    # a client's append is still sequence-checked
    with pytest.raises(OutOfOrderSequenceError):
        _append(log, _batch(7, 1, 99, True), from_client=True)
    log.close()
