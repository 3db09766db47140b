"""Per-record validation of client batches (Kafka's LogValidator, KIP-467): keyless records on a
compacted topic and timestamps outside message.timestamp.{before,after}.max.ms are rejected with
each offending record's index and Kafka's messages; nothing of a rejected batch is written; the
default config never opens records."""

from __future__ import annotations

import pytest

from kbroker.config import BrokerConfig, log_config_for
from kbroker.errors import ErrorCode, error_code_of
from kbroker.log import record_validation
from kbroker.log.config import LONG_MAX, LogConfig
from kbroker.log.log import Log
from kbroker.log.record_validation import RecordValidationError, validate_records
from kbroker.wire.records import COMPRESSION_NONE, Record, build_batch, decode_records, validate_batches

NOW = 10_000_000


def batch(records, compression=COMPRESSION_NONE):
    buf = bytearray(build_batch([Record(i, ts, key, b"v", []) for i, (key, ts) in enumerate(records)],
                                compression=compression))
    return buf, validate_batches(buf)


def open_log(tmp_path, **config):
    return Log.open(tmp_path / "t-0", LogConfig(**config), now_ms=lambda: NOW)


@pytest.mark.parametrize("compression", [0, 1, 4])  # none, gzip, zstd: compressed batches are opened too
def test_keyless_records_on_a_compacted_topic(tmp_path, compression):
    log = open_log(tmp_path, cleanup_policy="compact")
    buf, batches = batch([(b"a", NOW), (None, NOW), (b"c", NOW), (None, NOW)], compression)
    with pytest.raises(RecordValidationError) as err:
        log.append_as_leader(buf, batches, leader_epoch=0)
    exc = err.value
    assert error_code_of(exc) == ErrorCode.invalid_record
    message = "Compacted topic cannot accept message without key in topic partition t-0."
    assert exc.record_errors == [(1, message), (3, message)]
    assert str(exc) == ("One or more records have been rejected due to 2 record errors in total, and only showing "
                        f"the first three errors at most: [RecordError(batchIndex=1, message='{message}'), "
                        f"RecordError(batchIndex=3, message='{message}')]")
    assert log.log_end_offset == 0  # nothing of the batch was written
    buf, batches = batch([(b"a", NOW), (b"b", NOW)], compression)  # keyed records (and tombstones) are fine
    assert log.append_as_leader(buf, batches, leader_epoch=0).last_offset == 1


def test_timestamp_bounds(tmp_path):
    log = open_log(tmp_path, message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    buf, batches = batch([(b"a", NOW - 1000), (b"b", NOW - 1001), (b"c", NOW + 500), (b"d", NOW + 501),
                          (b"e", -1)])
    with pytest.raises(RecordValidationError) as err:
        log.append_as_leader(buf, batches, leader_epoch=0)
    assert error_code_of(err.value) == ErrorCode.invalid_timestamp
    assert str(err.value) == "One or more records have been rejected due to invalid timestamp"
    assert err.value.record_errors == [
        (1, f"Timestamp {NOW - 1001} of message with offset 1 is out of range. The timestamp should be within "
            f"[{NOW - 1000}, {NOW + 500}]"),
        (3, f"Timestamp {NOW + 501} of message with offset 3 is out of range. The timestamp should be within "
            f"[{NOW - 1000}, {NOW + 500}]"),
    ]
    assert log.log_end_offset == 0


def test_one_bound_prints_the_other_as_kafka_does():
    config = LogConfig(message_timestamp_after_max_ms=0)
    buf, batches = batch([(b"a", NOW + 1)])
    with pytest.raises(RecordValidationError) as err:
        validate_records(buf, batches, config, NOW, "t-0")
    # Java's now - Long.MAX
    assert err.value.record_errors[0][1].endswith(f"within [{NOW - LONG_MAX}, {NOW}]")


def test_key_error_wins_and_invalid_timestamp_is_the_code_when_any(tmp_path):
    config = LogConfig(cleanup_policy="compact", message_timestamp_after_max_ms=0)
    buf, batches = batch([(None, NOW + 5), (b"b", NOW + 5), (None, NOW)])
    with pytest.raises(RecordValidationError) as err:
        validate_records(buf, batches, config, NOW, "t-0")
    assert [i for i, _ in err.value.record_errors] == [0, 1, 2]
    assert err.value.record_errors[0][1].startswith("Compacted topic")  # one error a record: the key's
    assert error_code_of(err.value) == ErrorCode.invalid_timestamp


def test_log_append_time_topics_do_not_check_timestamps(tmp_path):
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=0,
                   message_timestamp_after_max_ms=0)
    buf, batches = batch([(b"a", 1)])
    info = log.append_as_leader(buf, batches, leader_epoch=0)
    assert info.log_append_time_ms == NOW


def test_the_default_path_never_opens_records(tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr(record_validation, "decode_records", lambda *a: opened.append(a) or decode_records(*a))
    assert not LogConfig().validates_records
    log = open_log(tmp_path)
    buf, batches = batch([(None, 1), (None, NOW + 10**9)])
    log.append_as_leader(buf, batches, leader_epoch=0)
    # only a future bound: a batch whose header max timestamp is within it is not opened either
    validate_records(*batch([(None, NOW - 10**9), (None, NOW)]), LogConfig(message_timestamp_after_max_ms=0),
                     NOW, "t-0")
    assert opened == []


def test_coordinator_appends_are_not_validated(tmp_path):
    log = open_log(tmp_path, cleanup_policy="compact")
    buf, batches = batch([(None, NOW)])
    log.append_as_leader(buf, batches, leader_epoch=0, from_client=False)
    assert log.log_end_offset == 1


def test_bounds_from_config_keys_with_the_deprecated_difference():
    broker = BrokerConfig.from_dict({"log.message.timestamp.difference.max.ms": "3000"})
    config = log_config_for(broker, {})
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (3000, 3000)
    config = log_config_for(broker, {"message.timestamp.after.max.ms": "100"})
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (3000, 100)
    config = log_config_for(BrokerConfig.from_dict({}), {"message.timestamp.before.max.ms": "7"})
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (7, LONG_MAX)
    assert config.validates_records
