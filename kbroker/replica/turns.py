"""Turn-taking for loops over thousands of items inside one task (a Fetch reading every partition of
a session, a batch of AlterPartition answers after a restart): `Turns.take(i)` yields to the
scheduler once the turn's time is spent, looking at the clock only every CHECK_EVERY items, so
other connections and tasks are not held up for hundreds of milliseconds."""

from __future__ import annotations

import trio

TURN_S = 0.002  # how long a loop runs before it yields
CHECK_EVERY = 64  # items between two looks at the clock


class Turns:
    __slots__ = ("_ends",)

    def __init__(self) -> None:
        self._ends = trio.current_time() + TURN_S

    async def take(self, i: int) -> None:
        """Before item `i`: yield if this turn is spent."""
        if i % CHECK_EVERY == CHECK_EVERY - 1 and trio.current_time() >= self._ends:
            await trio.lowlevel.checkpoint()
            self._ends = trio.current_time() + TURN_S
