"""Kafka's offset checkpoint files (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`replication-offset-checkpoint`, `cleaner-offset-checkpoint`): text "version\\ncount\\n" then one `topic partition offset` line per
partition. Written atomically: tmp file, fsync, rename, fsync of the directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kbroker.log.topic_partition import TopicPartition

__all__ = [
    "CheckpointError",
    "OffsetCheckpointFile",
    "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CLEANER_OFFSET_CHECKPOINT",
    "write_atomically",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"  # how far each compacted log is clean

_VERSION = 0
_MAX_ENTRIES = 10_000_000  # a count beyond this is corruption, not a real broker


class CheckpointError(Exception):
    """A checkpoint file exists but cannot be parsed; the caller logs it and carries on without it."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, sync: bool = True) -> None:
    """Replace `path` by `data` through a temp file and a rename; with `sync`, durable on return
    (without, a process crash still leaves the old or the new file whole, a machine crash may not)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


class OffsetCheckpointFile:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        lines = [str(_VERSION), str(len(offsets))]
        for tp, offset in offsets.items():
            if " " in tp.topic or "\n" in tp.topic:
                raise ValueError(f"topic name cannot be checkpointed: {tp.topic!r}")
            lines.append(f"{tp.topic} {tp.partition} {offset}")
        write_atomically(self.path, ("\n".join(lines) + "\n").encode("utf-8"))

    def read(self) -> dict[TopicPartition, int]:
        """{} when the file does not exist; CheckpointError when it is malformed."""
        try:
            text = self.path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            return {}
        except UnicodeDecodeError as e:
            raise CheckpointError(f"{self.path}: not UTF-8: {e}") from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        try:
            if len(lines) < 2:
                raise ValueError("missing header")
            version = int(lines[0])
            if version != _VERSION:
                raise ValueError(f"unrecognised version {version}")
            count = int(lines[1])
            if not 0 <= count <= _MAX_ENTRIES or len(lines) != count + 2:
                raise ValueError(f"expected {count} entries, found {len(lines) - 2}")
            out: dict[TopicPartition, int] = {}
            for line in lines[2:]:
                topic, partition, offset = line.split(" ")
                if not topic:
                    raise ValueError("empty topic")
                out[TopicPartition(topic, int(partition))] = int(offset)
            return out
        except ValueError as e:
            raise CheckpointError(f"malformed checkpoint file {self.path}: {e}") from None
