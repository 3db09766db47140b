"""Kafka offset checkpoint files: format, round trip, atomic replace, tolerant/strict reads."""

import os

import pytest

from kbroker.log.checkpoint import CheckpointError, OffsetCheckpointFile
from kbroker.log.topic_partition import TopicPartition


def test_round_trip_and_kafka_text_format(tmp_path):
    f = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    offsets = {TopicPartition("a", 0): 10, TopicPartition("b-x", 3): 0, TopicPartition("c", 1): 2**40}
    f.write(offsets)
    assert f.read() == offsets
    text = f.path.read_text()
    lines = text.splitlines()
    assert lines[:2] == ["0", "3"]
    assert "a 0 10" in lines and "b-x 3 0" in lines
    assert text.endswith("\n")
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_empty_and_missing(tmp_path):
    f = OffsetCheckpointFile(tmp_path / "cp")
    assert f.read() == {}
    f.write({})
    assert f.path.read_text() == "0\n0\n"
    assert f.read() == {}


@pytest.mark.parametrize("content", [
    "", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "0\nabc\n", "0\n1\na 0 1 2\n",
    "0\n-1\n", "\xff",
])
def test_corrupt_files_raise(tmp_path, content):
    p = tmp_path / "cp"
    p.write_bytes(content.encode("latin-1"))
    with pytest.raises(CheckpointError):
        OffsetCheckpointFile(p).read()


def test_write_is_atomic_when_replace_fails(tmp_path, monkeypatch):
    f = OffsetCheckpointFile(tmp_path / "cp")
    f.write({TopicPartition("a", 0): 1})

    def boom(*a, **k):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        f.write({TopicPartition("a", 0): 2})
    monkeypatch.undo()
    assert f.read() == {TopicPartition("a", 0): 1}
