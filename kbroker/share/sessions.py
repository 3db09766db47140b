"""Share sessions (KIP-932): the ShareFetch/ShareAcknowledge session of one share-group member on one
broker — its epoch and the partitions it fetches — as Kafka's SharePartitionManager keeps them.
Pure bookkeeping: the API layer asks, gets an error code or the partitions to serve.

Epochs (Kafka's ShareRequestMetadata): 0 opens a session (replacing the member's old one), -1 closes
it, anything else must be the session's next epoch (after Integer.MAX_VALUE comes 1). ShareFetch at
epoch 0 may not carry acknowledgements, at -1 may not ask for partitions; ShareAcknowledge may not
open a session. A broker holds at most `max_sessions` (group.share.max.share.sessions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Iterable

from kbroker.errors import ErrorCode

E = ErrorCode
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
MAX_EPOCH = 2**31 - 1
DEFAULT_MAX_SESSIONS = 2000  # group.share.max.share.sessions


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch its next request must carry
    partitions: set[Hashable] = field(default_factory=set)  # what each ShareFetch serves (topic id, partition)


@dataclass(frozen=True)
class SessionAnswer:
    error: ErrorCode
    message: str | None = None
    session: ShareSession | None = None
    closed: ShareSession | None = None  # a session ended by this request (its acquired records go back)


class ShareSessions:
    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def fetch(self, group_id: str, member_id: str, epoch: int, wanted: Iterable[Hashable],
              forgotten: Iterable[Hashable], has_acknowledgements: bool) -> SessionAnswer:
        """A ShareFetch: the session it belongs to (opened, moved on, or closed)."""
        wanted = list(wanted)
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                return SessionAnswer(E.invalid_request, "Acknowledge data present in initial fetch request.")
            old = self._sessions.pop(key, None)
            if len(self._sessions) >= self.max_sessions:
                if old is not None:
                    self._sessions[key] = old
                return SessionAnswer(E.share_session_limit_reached,
                                     f"The broker holds the most share sessions it may ({self.max_sessions}).")
            session = self._sessions[key] = ShareSession(group_id, member_id, next_epoch(epoch), set(wanted))
            return SessionAnswer(E.none, session=session, closed=old)
        session = self._sessions.get(key)
        if epoch == FINAL_EPOCH:
            if wanted:
                return SessionAnswer(E.invalid_request, "A final share fetch asks for no partitions.")
            if session is None:
                return SessionAnswer(E.share_session_not_found, f"Share session for member {member_id} not found.")
            del self._sessions[key]
            return SessionAnswer(E.none, session=session, closed=session)
        if session is None:
            return SessionAnswer(E.share_session_not_found, f"Share session for member {member_id} not found.")
        if epoch != session.epoch:
            return SessionAnswer(E.invalid_share_session_epoch,
                                 f"Share session epoch {epoch} is not the expected {session.epoch}.")
        session.partitions.difference_update(forgotten)
        session.partitions.update(wanted)
        session.epoch = next_epoch(epoch)
        return SessionAnswer(E.none, session=session)

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> SessionAnswer:
        """A ShareAcknowledge: it moves the session on, or (epoch -1) closes it; it never opens one."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            return SessionAnswer(E.invalid_share_session_epoch, "A share acknowledge cannot open a session.")
        session = self._sessions.get(key)
        if session is None:
            return SessionAnswer(E.share_session_not_found, f"Share session for member {member_id} not found.")
        if epoch == FINAL_EPOCH:
            del self._sessions[key]
            return SessionAnswer(E.none, session=session, closed=session)
        if epoch != session.epoch:
            return SessionAnswer(E.invalid_share_session_epoch,
                                 f"Share session epoch {epoch} is not the expected {session.epoch}.")
        session.epoch = next_epoch(epoch)
        return SessionAnswer(E.none, session=session)

    def remove_member(self, group_id: str, member_id: str) -> ShareSession | None:
        """The member left its group or was fenced: its session ends."""
        return self._sessions.pop((group_id, member_id), None)
