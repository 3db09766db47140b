"""Pure storage: Kafka's on-disk partition logs (segments, indexes, producer state, checkpoints).

Synchronous, no networking or async framework; see docs/storage.md.
"""

from kbroker.log.config import LogConfig
from kbroker.log.log import Log, LogAppendInfo
from kbroker.log.log_manager import LogManager
from kbroker.log.records_view import FetchDataInfo, FileRecords
from kbroker.log.topic_partition import TopicPartition

__all__ = ["LogConfig", "Log", "LogAppendInfo", "LogManager", "FetchDataInfo", "FileRecords", "TopicPartition"]
