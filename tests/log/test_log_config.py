"""LogConfig defaults (Kafka's, except 2-week retention) and TopicPartition naming."""

import pytest

from kbroker.log.config import LONG_MAX, LogConfig
from kbroker.log.topic_partition import TopicPartition


def test_defaults_match_kafka_topic_defaults():
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.retention_ms == 1209600000
    assert c.retention_bytes == -1
    assert c.index_interval_bytes == 4096
    assert c.segment_index_bytes == 10485760
    assert c.max_message_bytes == 1048588
    assert c.flush_interval_messages == LONG_MAX == 2**63 - 1
    assert c.flush_interval_ms == LONG_MAX
    assert c.message_timestamp_type == "CreateTime" and not c.log_append_time
    assert c.cleanup_policy == "delete" and c.delete_enabled
    assert c.file_delete_delay_ms == 60000
    assert c.preallocate is False


def test_cleanup_policy_and_replace():
    assert not LogConfig(cleanup_policy="compact").delete_enabled
    assert LogConfig(cleanup_policy="compact,delete").delete_enabled
    c = LogConfig().with_(retention_ms=5, message_timestamp_type="LogAppendTime")
    assert c.retention_ms == 5 and c.log_append_time
    with pytest.raises(AttributeError):
        c.retention_ms = 1  # frozen


def test_topic_partition_dir_names():
    tp = TopicPartition("my-topic", 12)
    assert tp.dir_name == "my-topic-12" == str(tp)
    assert TopicPartition.from_dir_name("my-topic-12") == tp
    assert TopicPartition.from_dir_name("a-b-c-0") == TopicPartition("a-b-c", 0)
    for bad in ["nopartition", "-3", "t-", "t-x", "t-1.abc-delete", "t-0-future", "t-١"]:
        with pytest.raises(ValueError):
            TopicPartition.from_dir_name(bad)
