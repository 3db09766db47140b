"""TopicPartition and the `{topic}-{partition}` partition directory naming Kafka uses."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


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
