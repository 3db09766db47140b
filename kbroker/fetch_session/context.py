"""What one Fetch request does with sessions (Kafka's FetchContext and its four kinds).

A handler gets a context from `FetchSessionCache.new_context`, reads `partitions_to_read()` (for an
incremental request: every partition of the session, with the parameters last sent), computes a
`PartitionResult` per partition exactly as for a sessionless fetch, and sends `build_response(...)`:

- `SessionlessContext` (session id 0, epoch -1; or an incremental request that emptied its session):
  every result, session id 0.
- `FullContext` (epoch 0): every result; the response creates a session holding them if the cache
  has or can make room (its id in the response), else session id 0.
- `IncrementalContext`: only the partitions with news (CachedPartition's rule), remembered in the
  session; partitions that returned records move to the end of the session's reading order, so the
  others are read first next time (fairness under max_bytes). If another request of the same session
  moved its epoch on meanwhile (a duplicate), the answer is INVALID_FETCH_SESSION_EPOCH.
- `SessionErrorContext`: nothing to read; the response is the error with session id 0.

`peek_response` answers what `build_response` would without changing the session (Kafka's
getResponseSize, for quotas); `throttled_response` is the empty answer to a throttled request.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbroker.errors import ErrorCode
from kbroker.fetch_session.metadata import INVALID_SESSION_ID, FetchMetadata, next_epoch
from kbroker.fetch_session.partitions import (
    CachedPartition,
    PartitionRequest,
    PartitionResult,
    TopicIdPartition,
)

if TYPE_CHECKING:
    from kbroker.fetch_session.cache import FetchSession, FetchSessionCache

Results = Iterable[tuple[TopicIdPartition, PartitionResult]] | Mapping[TopicIdPartition, PartitionResult]
Requests = Iterable[tuple[TopicIdPartition, PartitionRequest]] | Mapping[TopicIdPartition, PartitionRequest]


@dataclass(frozen=True, slots=True)
class SessionResponse:
    """The session part of a Fetch response: top-level error, session id, the partitions to send."""

    error: ErrorCode
    session_id: int
    partitions: list[tuple[TopicIdPartition, PartitionResult]] = field(default_factory=list)
    throttle_time_ms: int = 0


def _pairs(items) -> list:
    return list(items.items()) if isinstance(items, Mapping) else list(items)


def dedupe(partitions: Requests) -> list[tuple[TopicIdPartition, PartitionRequest]]:
    """The request's partitions as Kafka's LinkedHashMap keeps them: a repeated partition keeps its
    first place and its last parameters."""
    out: dict[TopicIdPartition, PartitionRequest] = {}
    for tp, req in _pairs(partitions):
        out[tp] = req
    return list(out.items())


class FetchContext:
    """Base: nothing to read, nothing to answer."""

    def partitions_to_read(self) -> list[tuple[TopicIdPartition, PartitionRequest]]:
        return []

    def fetch_offset(self, tp: TopicIdPartition) -> int | None:
        return None

    def peek_response(self, results: Results) -> SessionResponse:
        raise NotImplementedError

    def build_response(self, results: Results) -> SessionResponse:
        raise NotImplementedError

    def throttled_response(self, throttle_time_ms: int) -> SessionResponse:
        return SessionResponse(ErrorCode.none, INVALID_SESSION_ID, [], throttle_time_ms)


class SessionErrorContext(FetchContext):
    def __init__(self, error: ErrorCode, metadata: FetchMetadata) -> None:
        self.error = error
        self.metadata = metadata

    def peek_response(self, results: Results) -> SessionResponse:
        return SessionResponse(self.error, INVALID_SESSION_ID, [])

    def build_response(self, results: Results) -> SessionResponse:
        # which partitions this request meant is unknown: none are answered
        return SessionResponse(self.error, INVALID_SESSION_ID, [])

    def __repr__(self) -> str:
        return f"SessionErrorContext({self.error.name}, {self.metadata})"


class SessionlessContext(FetchContext):
    def __init__(self, fetch_data: list[tuple[TopicIdPartition, PartitionRequest]]) -> None:
        self.fetch_data = fetch_data
        self._offsets = {tp: req.fetch_offset for tp, req in fetch_data}

    def partitions_to_read(self) -> list[tuple[TopicIdPartition, PartitionRequest]]:
        return list(self.fetch_data)

    def fetch_offset(self, tp: TopicIdPartition) -> int | None:
        return self._offsets.get(tp)

    def peek_response(self, results: Results) -> SessionResponse:
        return SessionResponse(ErrorCode.none, INVALID_SESSION_ID, _pairs(results))

    def build_response(self, results: Results) -> SessionResponse:
        return SessionResponse(ErrorCode.none, INVALID_SESSION_ID, _pairs(results))

    def __repr__(self) -> str:
        return f"SessionlessContext({len(self.fetch_data)} partition(s))"


class FullContext(FetchContext):
    def __init__(self, cache: FetchSessionCache, fetch_data: list[tuple[TopicIdPartition, PartitionRequest]],
                 uses_topic_ids: bool, is_follower: bool) -> None:
        self.cache = cache
        self.fetch_data = fetch_data
        self.uses_topic_ids = uses_topic_ids
        self.is_follower = is_follower
        self._requests = dict(fetch_data)

    def partitions_to_read(self) -> list[tuple[TopicIdPartition, PartitionRequest]]:
        return list(self.fetch_data)

    def fetch_offset(self, tp: TopicIdPartition) -> int | None:
        req = self._requests.get(tp)
        return req.fetch_offset if req is not None else None

    def peek_response(self, results: Results) -> SessionResponse:
        return SessionResponse(ErrorCode.none, INVALID_SESSION_ID, _pairs(results))

    def build_response(self, results: Results) -> SessionResponse:
        pairs = _pairs(results)
        for tp, _ in pairs:
            if tp not in self._requests:
                raise ValueError(f"a result for {tp}, which the request did not ask for")

        def create_partitions() -> dict:
            cached: dict = {}
            for tp, result in pairs:
                part = CachedPartition(tp, self._requests[tp])
                part.maybe_update_response_data(result, update=True)  # remember what is sent
                cached[part.key] = part
            return cached

        session_id = self.cache.maybe_create_session(self.cache.now_ms(), self.is_follower, len(pairs),
                                                     self.uses_topic_ids, create_partitions)
        return SessionResponse(ErrorCode.none, session_id, pairs)

    def __repr__(self) -> str:
        return f"FullContext({len(self.fetch_data)} partition(s), follower={self.is_follower})"


class IncrementalContext(FetchContext):
    def __init__(self, session: FetchSession, metadata: FetchMetadata, topic_names: Mapping[uuid.UUID, str]) -> None:
        self.session = session
        self.metadata = metadata
        self.topic_names = topic_names

    def _epoch_moved_on(self) -> bool:
        """Another request of this session came after ours (a duplicate or a retry)."""
        return self.session.epoch != next_epoch(self.metadata.epoch)

    def partitions_to_read(self) -> list[tuple[TopicIdPartition, PartitionRequest]]:
        return [(part.tip, part.req) for part in self.cached_partitions()]

    def cached_partitions(self) -> list[CachedPartition]:
        """The session's partitions in reading order (their `memo` is the handler's)."""
        session = self.session
        parts = list(session.partitions.values())
        if session.uses_topic_ids and session.unresolved:  # only after partitions were added
            for part in parts:
                if part.maybe_resolve_unknown_name(self.topic_names):
                    session.memo = None
            session.unresolved = any(part.tip.topic is None for part in parts)
        return parts

    def fetch_offset(self, tp: TopicIdPartition) -> int | None:
        return self.session.fetch_offset(tp)

    def _select(self, pairs, update: bool) -> list[tuple[TopicIdPartition, PartitionResult]]:
        partitions = self.session.partitions
        selected = []
        for tp, result in pairs:
            part = partitions.get(tp.key)
            if part is None:
                raise ValueError(f"a result for {tp}, which is not in fetch session {self.session.id}")
            if part.maybe_update_response_data(result, update):
                selected.append((tp, result))
                if update and result.records_size > 0:  # read last next time
                    partitions[tp.key] = partitions.pop(tp.key)
        return selected

    def peek_response(self, results: Results) -> SessionResponse:
        if self._epoch_moved_on():
            return SessionResponse(ErrorCode.invalid_fetch_session_epoch, self.session.id, [])
        return SessionResponse(ErrorCode.none, self.session.id, self._select(_pairs(results), update=False))

    def build_response(self, results: Results) -> SessionResponse:
        if self._epoch_moved_on():
            return SessionResponse(ErrorCode.invalid_fetch_session_epoch, self.session.id, [])
        return SessionResponse(ErrorCode.none, self.session.id, self._select(_pairs(results), update=True))

    def throttled_response(self, throttle_time_ms: int) -> SessionResponse:
        if self._epoch_moved_on():
            return SessionResponse(ErrorCode.invalid_fetch_session_epoch, self.session.id, [], throttle_time_ms)
        return SessionResponse(ErrorCode.none, self.session.id, [], throttle_time_ms)

    def __repr__(self) -> str:
        return f"IncrementalContext(session={self.session.id}, epoch={self.metadata.epoch})"
