"""A Fetch request's session id and epoch (KIP-227), as Kafka's `FetchMetadata` defines them.

Owns the constants and the arithmetic of epochs, nothing else:

- session id 0 (`INVALID_SESSION_ID`) means "no session"; a broker hands out positive ids.
- epoch 0 (`INITIAL_EPOCH`) asks for a new session (closing the one named, if any) and lists every
  partition: a *full* request. Epoch -1 (`FINAL_EPOCH`) is full too, but closes the named session and
  creates none: with session id 0 it is the *sessionless* fetch every pre-v7 request implies (`LEGACY`).
- any other epoch is an *incremental* request in session `session_id`: it must carry the session's
  next epoch (1 after the full request created it, then +1, and 1 again after 2**31 - 1), lists only
  the partitions added or changed since, and names the ones to forget.
"""

from __future__ import annotations

from dataclasses import dataclass

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1  # Integer.MAX_VALUE


def next_epoch(prev_epoch: int) -> int:
    """The epoch after `prev_epoch` (FetchMetadata.nextEpoch): FINAL stays FINAL, MAX wraps to 1."""
    if prev_epoch < 0:
        return FINAL_EPOCH
    if prev_epoch == MAX_EPOCH:
        return 1
    return prev_epoch + 1


@dataclass(frozen=True, slots=True)
class FetchMetadata:
    """The (session id, epoch) pair a Fetch request carries (v7+; older versions imply `LEGACY`)."""

    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH

    @property
    def is_full(self) -> bool:
        """A full request lists every partition it wants; INITIAL and FINAL epochs are full."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    # The client's side of the protocol (Kafka's FetchSessionHandler uses these; the tests' model
    # client too).

    def next_close_existing(self) -> FetchMetadata:
        """Close this session and create none (the next request is sessionless)."""
        return FetchMetadata(self.session_id, FINAL_EPOCH)

    def next_close_existing_attempt_new(self) -> FetchMetadata:
        """Close this session and ask for a new one."""
        return FetchMetadata(self.session_id, INITIAL_EPOCH)

    @staticmethod
    def new_incremental(session_id: int) -> FetchMetadata:
        """The first incremental request of a session the broker just created."""
        return FetchMetadata(session_id, next_epoch(INITIAL_EPOCH))

    def next_incremental(self) -> FetchMetadata:
        return FetchMetadata(self.session_id, next_epoch(self.epoch))

    def __str__(self) -> str:
        sid = "INVALID" if self.session_id == INVALID_SESSION_ID else str(self.session_id)
        epoch = {INITIAL_EPOCH: "INITIAL", FINAL_EPOCH: "FINAL"}.get(self.epoch, str(self.epoch))
        return f"(sessionId={sid}, epoch={epoch})"


INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)  # a client with no session yet
LEGACY = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)  # what Fetch v0-6 implies: sessionless
