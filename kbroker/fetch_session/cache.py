"""The broker's incremental fetch sessions (KIP-227): Kafka's `FetchSession`, `FetchSessionCache` and
`FetchManager.newContext`, without locks (kbroker's handlers run on one trio thread) and unsharded.

`FetchSessionCache.new_context` is the one call a Fetch handler makes: given the request's metadata
and partitions it returns a `FetchContext` (context.py) — sessionless, full, incremental or a session
error — which says what to read and, given what was read, what to answer.

The cache holds at most `max_entries` sessions (`max.incremental.fetch.session.cache.slots`, 1000 by
default). When it is full, a new session may take the place of (Kafka's `tryEvict`):
1. the least recently used session, if it has been unused for more than `eviction_ms` (Kafka's
   hard-coded MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, 120 s), else
2. the least valuable evictable session — ordered by (privileged, partition count, id) — when the
   new one is worth at least as much: a follower's (privileged) session beats a consumer's, a larger
   one a smaller one. A session becomes evictable by everyone once it is older than `eviction_ms`;
   a consumer's is evictable by followers from the start. Both are judged when it was last used.
Session ids are random in [1, 2**31 - 2], never one that is cached. The clock (`now_ms`, in ms) and
the random source are injected, so tests run on a fake clock.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping

from kbroker.errors import ErrorCode
from kbroker.fetch_session.context import (
    FetchContext,
    FullContext,
    IncrementalContext,
    SessionErrorContext,
    SessionlessContext,
    dedupe,
)
from kbroker.fetch_session.metadata import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    MAX_EPOCH,
    FetchMetadata,
    next_epoch,
)
from kbroker.fetch_session.partitions import (
    CachedPartition,
    PartitionRequest,
    TopicIdPartition,
)

DEFAULT_MAX_ENTRIES = 1000  # max.incremental.fetch.session.cache.slots
DEFAULT_EVICTION_MS = 120_000  # KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (not a config)
TOPIC_IDS_MIN_VERSION = 13  # Fetch v13+ names topics by id; a session keeps the style it began with


class FetchSession:
    """One session: its id, epoch and partitions (in the order they are read), and the cache's
    bookkeeping (when it was last used, its size and evictability then)."""

    __slots__ = ("id", "privileged", "partitions", "uses_topic_ids", "creation_ms", "last_used_ms",
                 "epoch", "cached_size", "evictable_by_all", "evictable_by_privileged", "memo",
                 "unresolved")

    def __init__(self, session_id: int, privileged: bool, partitions: dict[Hashable, CachedPartition],
                 uses_topic_ids: bool, creation_ms: int, last_used_ms: int, epoch: int) -> None:
        self.id = session_id
        self.privileged = privileged  # created by a follower
        self.partitions = partitions  # key -> CachedPartition, in reading order
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = creation_ms
        self.last_used_ms = last_used_ms
        self.epoch = epoch  # the epoch the next incremental request must carry
        self.cached_size = -1  # the size when last touched; -1 while not in the cache
        self.evictable_by_all = False
        self.evictable_by_privileged = False
        self.memo = None  # the handler's, about the partitions as a whole; dropped when they change
        self.unresolved = True  # may hold a partition whose topic id had no name (looked at on the next read)

    @property
    def size(self) -> int:
        return len(self.partitions)

    @property
    def metadata(self) -> FetchMetadata:
        return FetchMetadata(self.id, self.epoch)

    @property
    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def fetch_offset(self, tp: TopicIdPartition) -> int | None:
        cached = self.partitions.get(tp.key)
        return cached.fetch_offset if cached is not None else None

    def update(self, partitions: Iterable[tuple[TopicIdPartition, PartitionRequest]],
               forgotten: Iterable[TopicIdPartition]
               ) -> tuple[list[TopicIdPartition], list[TopicIdPartition], list[TopicIdPartition]]:
        """Apply an incremental request: listed partitions are added (at the end) or their request
        parameters replaced; forgotten ones removed. Returns (added, updated, removed)."""
        added, updated, removed = [], [], []
        for tp, req in partitions:
            cached = self.partitions.get(tp.key)
            if cached is None:
                self.partitions[tp.key] = CachedPartition(tp, req)
                added.append(tp)
            else:
                cached.update_request_params(req)
                updated.append(tp)
        for tp in forgotten:
            if self.partitions.pop(tp.key, None) is not None:
                removed.append(tp)
        if added or removed:
            self.memo = None
        if added:
            self.unresolved = True
        return added, updated, removed

    def __repr__(self) -> str:
        return (f"FetchSession(id={self.id}, privileged={self.privileged}, size={self.size}, "
                f"uses_topic_ids={self.uses_topic_ids}, creation_ms={self.creation_ms}, "
                f"last_used_ms={self.last_used_ms}, epoch={self.epoch})")


class FetchSessionCache:
    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, eviction_ms: int = DEFAULT_EVICTION_MS, *,
                 now_ms: Callable[[], int], rng: random.Random | None = None) -> None:
        if max_entries < 0:
            raise ValueError("max.incremental.fetch.session.cache.slots must be at least 0")
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.now_ms = now_ms
        self._rng = rng if rng is not None else random.Random()
        self._sessions: dict[int, FetchSession] = {}
        self._num_partitions = 0
        self.evictions = 0  # IncrementalFetchSessionEvictionsPerSec counts these
        # Fetch requests by what new_context made of them (kbroker's metric; Kafka has none)
        self.requests = {"sessionless": 0, "full": 0, "incremental": 0, "error": 0}

    # --- the cache (FetchSessionCacheShard) ---

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: int) -> bool:
        return session_id in self._sessions

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    @property
    def total_partitions(self) -> int:
        """Partitions cached over all sessions (NumIncrementalFetchPartitionsCached)."""
        return self._num_partitions

    def statistics(self) -> dict[str, int]:
        return {"sessions": len(self._sessions), "partitions_cached": self._num_partitions,
                "evictions": self.evictions, "max_entries": self.max_entries,
                **{f"{kind}_requests": n for kind, n in self.requests.items()}}

    def new_session_id(self) -> int:
        """A random positive id no cached session has."""
        while True:
            session_id = self._rng.randrange(1, MAX_EPOCH)  # nextInt(1, Int.MaxValue)
            if session_id not in self._sessions and session_id != INVALID_SESSION_ID:
                return session_id

    def maybe_create_session(self, now: int, privileged: bool, size: int, uses_topic_ids: bool,
                             create_partitions: Callable[[], dict[Hashable, CachedPartition]]) -> int:
        """Create a session if there is room or one can be evicted: its id, else INVALID_SESSION_ID."""
        if len(self._sessions) < self.max_entries or self._try_evict(privileged, size, now):
            session = FetchSession(self.new_session_id(), privileged, create_partitions(), uses_topic_ids,
                                   now, now, next_epoch(INITIAL_EPOCH))
            self._sessions[session.id] = session
            self.touch(session, now)
            return session.id
        return INVALID_SESSION_ID

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        if not self._sessions:
            return False
        # the least recently used session goes if it is stale (ties: the lower id, as Kafka's TreeMap)
        lru = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - lru.last_used_ms > self.eviction_ms:
            self._evict(lru)
            return True
        # else the least valuable evictable one, if it is worth no more than the new one
        if privileged:
            candidates = [s for s in self._sessions.values() if s.evictable_by_privileged]
        else:
            candidates = [s for s in self._sessions.values() if s.evictable_by_all]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: s.evictable_key)
        if (privileged, size, 0) < victim.evictable_key:
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.remove(session.id)
        self.evictions += 1

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._num_partitions -= session.cached_size
            session.cached_size = -1
        return session

    def touch(self, session: FetchSession, now: int) -> None:
        """Mark `session` used at `now`: its recency, size and evictability are judged from here."""
        session.last_used_ms = now
        if session.cached_size != -1:
            self._num_partitions -= session.cached_size
        session.cached_size = session.size
        old_enough = now - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old_enough
        session.evictable_by_all = old_enough
        self._num_partitions += session.cached_size

    # --- the decision a Fetch handler asks for (FetchManager.newContext) ---

    def new_context(self, metadata: FetchMetadata,
                    partitions: Iterable[tuple[TopicIdPartition, PartitionRequest]] | Mapping[
                        TopicIdPartition, PartitionRequest],
                    forgotten: Iterable[TopicIdPartition] = (), *, version: int, is_follower: bool = False,
                    topic_names: Mapping[uuid.UUID, str] | None = None) -> FetchContext:
        """The context of one Fetch request.

        `partitions` are the request's partitions in order (names resolved from ids for v13+, None
        when unknown), `forgotten` its forgotten topics' partitions (v7+), `version` the request's
        version, `is_follower` whether a replica sent it (its session is privileged), `topic_names`
        the broker's id -> name map, to name partitions a session learnt while their topic was unknown.
        """
        context = self._new_context(metadata, dedupe(partitions), forgotten, version, is_follower, topic_names)
        kind = ("sessionless" if isinstance(context, SessionlessContext) else "full"
                if isinstance(context, FullContext) else "incremental"
                if isinstance(context, IncrementalContext) else "error")
        self.requests[kind] += 1
        return context

    def _new_context(self, metadata: FetchMetadata, fetch_data: list[tuple[TopicIdPartition, PartitionRequest]],
                     forgotten: Iterable[TopicIdPartition], version: int, is_follower: bool,
                     topic_names: Mapping[uuid.UUID, str] | None) -> FetchContext:
        if metadata.is_full:
            if metadata.session_id != INVALID_SESSION_ID:
                self.remove(metadata.session_id)  # a full request closes the session it names
            if metadata.epoch == FINAL_EPOCH:
                return SessionlessContext(fetch_data)
            return FullContext(self, fetch_data, version >= TOPIC_IDS_MIN_VERSION, is_follower)
        session = self._sessions.get(metadata.session_id)
        if session is None:
            return SessionErrorContext(ErrorCode.fetch_session_id_not_found, metadata)
        if session.epoch != metadata.epoch:
            return SessionErrorContext(ErrorCode.invalid_fetch_session_epoch, metadata)
        if session.uses_topic_ids != (version >= TOPIC_IDS_MIN_VERSION):
            return SessionErrorContext(ErrorCode.fetch_session_topic_id_error, metadata)
        session.update(fetch_data, forgotten)
        if not session.partitions:  # nothing left: the session closes, this fetch is sessionless
            self.remove(session.id)
            return SessionlessContext(fetch_data)
        self.touch(session, self.now_ms())
        session.epoch = next_epoch(session.epoch)
        return IncrementalContext(session, metadata, topic_names or {})
