"""LogConfig: the topic-level settings the storage layer obeys, with Kafka's names and defaults.

Mapping of config keys (`retention.ms`, `log.retention.ms`, ...) onto these fields lives elsewhere;
storage only takes a LogConfig. kbroker deviates from Kafka in one default: retention_ms is two
weeks (Kafka: one week).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

__all__ = ["LogConfig", "LONG_MAX"]

LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 1209600000  # kbroker default: 2 weeks; -1 = unlimited
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10485760
    max_message_bytes: int = 1048588
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    # CreateTime records must lie in [now - before, now + after] (the difference.max.ms fallback applied)
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    cleanup_policy: str = "delete"  # "delete", "compact" or "compact,delete"
    file_delete_delay_ms: int = 60000
    preallocate: bool = False  # accepted for compatibility; files are never preallocated
    delete_retention_ms: int = 86400000  # how long tombstones survive cleaning
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    # Tiered storage (KIP-405): closed segments are archived; local copies go by local.retention.*
    # once archived (-2: the same as retention.*), the archive by retention.*.
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy.replace(" ", "").split(",")

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy.replace(" ", "").split(",")

    @property
    def local_retention_ms_effective(self) -> int:
        """How long local copies stay: local.retention.ms, or retention.ms for -2."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def local_retention_bytes_effective(self) -> int:
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @cached_property
    def validates_records(self) -> bool:
        """Whether client batches must be opened on append: keys of a compacted topic, timestamps
        of a CreateTime topic with a bound. False by default, so the produce path stays header-only."""
        bounded = self.message_timestamp_before_max_ms != LONG_MAX or self.message_timestamp_after_max_ms != LONG_MAX
        return self.compact_enabled or (bounded and not self.log_append_time)

    def with_(self, **changes) -> LogConfig:
        return replace(self, **changes)
