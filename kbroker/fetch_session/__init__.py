"""Incremental fetch sessions (KIP-227), the pure core: no I/O, no storage, no handlers.

Modelled on Kafka's FetchSession.scala and FetchMetadata.java:
- `metadata.py`: a request's (session id, epoch) and what full, incremental and sessionless mean;
- `partitions.py`: the plain values a handler passes in and gets back, and `CachedPartition` with the
  rule deciding which partitions an incremental response carries;
- `cache.py`: the sessions, the bounded cache and its eviction rules, and `new_context`, the call a
  Fetch handler makes;
- `context.py`: the four kinds of `FetchContext` a request gets, which build its response;
- `client.py`: the fetching side (Kafka's FetchSessionHandler), which kbroker's followers use.

A handler does::

    context = cache.new_context(FetchMetadata(session_id, epoch), partitions, forgotten,
                                version=version, is_follower=replica_id >= 0, topic_names=names)
    results = [(tp, read(tp, req)) for tp, req in context.partitions_to_read()]
    response = context.build_response(results)   # .error, .session_id, .partitions
"""

from kbroker.fetch_session.cache import (
                                           DEFAULT_EVICTION_MS,
                                           DEFAULT_MAX_ENTRIES,
                                           FetchSession,
                                           FetchSessionCache,
)
from kbroker.fetch_session.client import FetchRequestData, FetchSessionHandler
from kbroker.fetch_session.context import (
                                           FetchContext,
                                           FullContext,
                                           IncrementalContext,
                                           SessionErrorContext,
                                           SessionlessContext,
                                           SessionResponse,
)
from kbroker.fetch_session.metadata import (
                                           FINAL_EPOCH,
                                           INITIAL,
                                           INITIAL_EPOCH,
                                           INVALID_SESSION_ID,
                                           LEGACY,
                                           FetchMetadata,
                                           next_epoch,
)
from kbroker.fetch_session.partitions import (
                                           ZERO_UUID,
                                           CachedPartition,
                                           PartitionRequest,
                                           PartitionResult,
                                           TopicIdPartition,
                                           partition_key,
)

__all__ = [
                                           "DEFAULT_EVICTION_MS",
                                           "DEFAULT_MAX_ENTRIES",
                                           "FINAL_EPOCH",
                                           "INITIAL",
                                           "INITIAL_EPOCH",
                                           "INVALID_SESSION_ID",
                                           "LEGACY",
                                           "ZERO_UUID",
                                           "CachedPartition",
                                           "FetchContext",
                                           "FetchMetadata",
                                           "FetchRequestData",
                                           "FetchSession",
                                           "FetchSessionCache",
                                           "FetchSessionHandler",
                                           "FullContext",
                                           "IncrementalContext",
                                           "PartitionRequest",
                                           "PartitionResult",
                                           "SessionErrorContext",
                                           "SessionResponse",
                                           "SessionlessContext",
                                           "TopicIdPartition",
                                           "next_epoch",
                                           "partition_key",
]
