"""Regressions found by the stock-client group tests (compat-tests/test_groups_*.py), each at the
layer where the bug was: the request as kio decodes it from the wire, through the handler."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from kbroker.api.context import RequestContext
from kbroker.api.offsets import offset_commit
from kbroker.errors import ErrorCode as E
from kbroker.group.coordinator import GroupConfig, GroupCoordinator
from kbroker.wire.protocol import decode_request, encode_request, parse_request_header

OFFSET_COMMIT = 8


class MemoryOffsetsLog:
    def __init__(self) -> None:
        self.partitions: dict[int, list] = {}

    def append(self, partition, entries, **_producer):
        records = self.partitions.setdefault(partition, [])
        records.extend(entries)
        return len(records) - len(entries)


def _context(version: int, coordinator: GroupCoordinator) -> RequestContext:
    topics = {"t": SimpleNamespace(num_partitions=2)}
    async def coordinator_for_request():
        return coordinator

    broker = SimpleNamespace(metadata=SimpleNamespace(topic=topics.get), cluster=False,
                             views=SimpleNamespace(view=lambda name: None),  # no filtered views
                             group_coordinator_for_request=coordinator_for_request)
    header = parse_request_header(encode_request(OFFSET_COMMIT, version, 1, "c", {"group_id": "g", "topics": []})[4:])[0]
    return RequestContext(header, broker)  # type: ignore[arg-type]


def _wire_request(version: int, retention_ms: int):
    """An OffsetCommit as aiokafka/kafka-python send it (simple commit: generation -1, no member)."""
    frame = encode_request(OFFSET_COMMIT, version, 1, "c", {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time": retention_ms,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                 "committed_metadata": ""}]}]})
    header, body_offset = parse_request_header(frame[4:])
    return decode_request(header, frame[4:], body_offset)


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("retention_ms", [-1, 60_000])
def test_offset_commit_v2_to_v4_retention_time_as_kio_decodes_it(version, retention_ms):
    # kio decodes retention_time_ms as a datetime.timedelta; the handler compared it with 0 and
    # every OffsetCommit v2-v4 (aiokafka's commit) failed with a TypeError -> connection closed.
    coordinator = GroupCoordinator(GroupConfig(), MemoryOffsetsLog(), lambda: int(time.time() * 1000))
    request = _wire_request(version, retention_ms)
    before = time.time_ns() // 1_000_000
    response = asyncio.run(offset_commit(_context(version, coordinator), request))
    after = time.time_ns() // 1_000_000
    assert response["topics"][0]["partitions"][0]["error_code"] == E.none
    committed = coordinator.groups["g"].offsets[("t", 0)]
    assert committed.offset == 7
    if retention_ms < 0:
        assert committed.expire_timestamp == -1  # the broker's offsets.retention.minutes applies
    else:
        assert before + retention_ms <= committed.expire_timestamp <= after + retention_ms
