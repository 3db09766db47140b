"""The fetching side of incremental fetch sessions (KIP-227): Kafka's `FetchSessionHandler`, which
kbroker's followers use towards each leader (replica/fetcher.py). Pure: it decides what a request
carries and what a response means; the fetcher does the I/O.

- `build(wanted)`: the partitions wanted now, with their parameters. Without a session (or after
  an error) the request is full: every wanted partition, epoch 0. In a session it is incremental:
  only the partitions added or whose parameters changed (fetch offset, log start, max bytes,
  leader epochs), and the dropped ones as forgotten. The handler's idea of the session changes at
  build time, as Kafka's does; a failed request makes the next one full, so nothing is lost.
- `handle_response(error, session_id, partitions, throttle_time_ms)`: whether the response may be
  used. A full response creates the session (its id > 0) or says the broker keeps none; an
  incremental one continues the session or, with session id 0, ends it. A session error, an
  empty throttled full response, or partitions the request did not name make the next request
  full again (FETCH_SESSION_ID_NOT_FOUND: with no session id; otherwise closing the old one).
- `handle_error()`: the request failed on the way (a broken connection): the next one is full.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from kbroker.errors import ErrorCode
from kbroker.fetch_session.metadata import INITIAL, INVALID_SESSION_ID, FetchMetadata
from kbroker.fetch_session.partitions import PartitionRequest, TopicIdPartition


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """What one request carries: its session metadata, the partitions to send and to forget."""

    metadata: FetchMetadata
    to_send: list[tuple[TopicIdPartition, PartitionRequest]]
    to_forget: list[TopicIdPartition]

    @property
    def is_full(self) -> bool:
        return self.metadata.is_full


class FetchSessionHandler:
    def __init__(self) -> None:
        self.next_metadata = INITIAL
        # what the broker's session holds (or will, once this request is answered), in its order
        self.session_partitions: dict[Hashable, tuple[TopicIdPartition, PartitionRequest]] = {}

    @property
    def session_id(self) -> int:
        return self.next_metadata.session_id

    def build(self, wanted: Iterable[tuple[TopicIdPartition, PartitionRequest]]) -> FetchRequestData:
        wanted = list(wanted)
        if self.next_metadata.is_full:
            self.session_partitions = {tp.key: (tp, req) for tp, req in wanted}
            return FetchRequestData(self.next_metadata, list(self.session_partitions.values()), [])
        session = self.session_partitions
        held = len(session)
        to_send, added, present = [], [], 0
        for entry in wanted:  # a steady partition is the same entry object as last time: cheap
            key = entry[0].key
            old = session.get(key)
            if old is None:
                added.append((key, entry))
                continue
            present += 1
            if old is not entry and old[1] != entry[1]:
                session[key] = entry
                to_send.append(entry)
        to_forget = []
        if present < held:  # some partitions are no longer wanted
            keys = {tp.key for tp, _ in wanted}
            for key in [k for k in session if k not in keys]:
                to_forget.append(session.pop(key)[0])
        for key, entry in added:
            if key not in session:
                session[key] = entry
                to_send.append(entry)
        return FetchRequestData(self.next_metadata, to_send, to_forget)

    def build_changed(self, changed: Iterable[tuple[TopicIdPartition, PartitionRequest]]) -> FetchRequestData | None:
        """An incremental request when the caller knows what may have changed (and that nothing
        went): `changed` is sent where it differs from the session; None when there is no session
        (the request must be full: `build` it)."""
        if self.next_metadata.is_full:
            return None
        session = self.session_partitions
        to_send = []
        for entry in changed:
            key = entry[0].key
            old = session.get(key)
            if old is None or (old is not entry and old[1] != entry[1]):
                session[key] = entry
                to_send.append(entry)
        return FetchRequestData(self.next_metadata, to_send, [])

    def handle_response(self, error: int, session_id: int, partitions: Iterable[TopicIdPartition],
                        throttle_time_ms: int = 0) -> bool:
        """Whether the response's partitions may be applied; moves the session on."""
        if error != ErrorCode.none:
            if error == ErrorCode.fetch_session_id_not_found:
                self.next_metadata = INITIAL
            else:
                self.next_metadata = self.next_metadata.next_close_existing_attempt_new()
            return False
        keys = [tp.key for tp in partitions]
        extra = [k for k in keys if k not in self.session_partitions]
        if self.next_metadata.is_full:
            if not keys and throttle_time_ms > 0:  # KIP-219: a throttled full fetch is answered empty
                self.next_metadata = INITIAL
                return False
            if extra:
                self.next_metadata = INITIAL
                return False
            if session_id == INVALID_SESSION_ID:  # the broker keeps no session for us
                self.next_metadata = INITIAL
            else:
                self.next_metadata = FetchMetadata.new_incremental(session_id)
            return True
        if extra:
            self.next_metadata = self.next_metadata.next_close_existing_attempt_new()
            return False
        if session_id == INVALID_SESSION_ID:  # the broker ended the session
            self.next_metadata = INITIAL
        else:
            self.next_metadata = self.next_metadata.next_incremental()
        return True

    def handle_error(self) -> None:
        self.next_metadata = self.next_metadata.next_close_existing_attempt_new()
