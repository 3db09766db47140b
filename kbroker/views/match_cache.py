"""A bounded LRU of batch verdicts, so consumers re-reading a view's batches do not walk their
records again. Pure.

Keys name a batch exactly: (view id, partition, base offset, CRC, size) — a batch truncated away
and replaced by another at the same offset (after a leader change) has another CRC. Entries cost
a fixed overhead plus their data: the kept records' bounds (a partial uncompressed batch) or the
rebuilt batch (a partial compressed one); the total stays under `max_bytes`, least recently used
first out.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable

from kbroker.views.batch_filter import Kept, Verdict

ENTRY_OVERHEAD = 128  # a key tuple and its dict slot, roughly


class MatchCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, Verdict] = OrderedDict()
        self._bytes = 0
        self.hits = self.misses = 0

    @staticmethod
    def _cost(verdict: Verdict) -> int:
        if isinstance(verdict, Kept):
            return ENTRY_OVERHEAD + verdict.nbytes
        return ENTRY_OVERHEAD + (len(verdict) if isinstance(verdict, bytes) else 0)

    def get(self, key: Hashable) -> Verdict | None:
        verdict = self._entries.get(key)
        if verdict is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return verdict

    def put(self, key: Hashable, verdict: Verdict) -> None:
        cost = self._cost(verdict)
        if cost > self.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= self._cost(old)
        self._entries[key] = verdict
        self._bytes += cost
        while self._bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= self._cost(evicted)

    def statistics(self) -> dict[str, int]:
        return {"entries": len(self._entries), "bytes": self._bytes, "hits": self.hits, "misses": self.misses}
