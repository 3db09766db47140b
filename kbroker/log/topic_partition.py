"""TopicPartition and the `{topic}-{partition}` partition directory naming Kafka uses, with its
suffixed forms `{topic}-{partition}.{uuid}{suffix}` (`-future`, `-delete`, `-stray`)."""

from __future__ import annotations

import uuid
from typing import NamedTuple

__all__ = ["TopicPartition", "MAX_DIR_NAME"]

MAX_DIR_NAME = 255  # a file name's limit on the usual file systems


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __str__(self) -> str:
        return self.dir_name

    @classmethod
    def from_dir_name(cls, name: str) -> TopicPartition:
        """Parse `topic-partition`; the topic may itself contain '-', so split on the last one.

        Raises ValueError for names that are not a partition dir (e.g. `x-delete`, `x-future`).
        """
        topic, sep, partition = name.rpartition("-")
        if not sep or not topic or not partition.isdigit() or not partition.isascii():
            raise ValueError(f"not a partition directory name: {name!r}")
        return cls(topic, int(partition))

    def suffixed_dir_name(self, suffix: str) -> str:
        """Kafka's `{topic}-{partition}.{uuid}{suffix}` (a future log, one being deleted)."""
        return f"{self.dir_name}.{uuid.uuid4().hex}{suffix}"

    @classmethod
    def from_suffixed_dir_name(cls, name: str, suffix: str) -> TopicPartition:
        """Parse `{topic}-{partition}.{uuid}{suffix}`; ValueError for anything else."""
        if not name.endswith(suffix):
            raise ValueError(f"not a {suffix} directory name: {name!r}")
        base, dot, unique = name[: -len(suffix)].rpartition(".")
        if not dot or not unique.isalnum():
            raise ValueError(f"not a {suffix} directory name: {name!r}")
        return cls.from_dir_name(base)
