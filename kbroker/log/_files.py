"""Small file helpers shared by the storage modules: full writes/reads on raw fds, paths."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["as_path", "write_all", "pread_exact", "pread_upto"]


def as_path(p) -> Path:
    """`p` as a Path, without re-parsing one that is already a Path (loading 10,000 logs at a
    restart built some 100,000 Paths from Paths)."""
    return p if isinstance(p, Path) else Path(p)


def write_all(fd: int, data) -> int:
    """os.write until everything is written (regular files may write short on ENOSPC/signals)."""
    view = memoryview(data)
    total = len(view)
    while view:
        view = view[os.write(fd, view) :]
    return total


def pread_upto(fd: int, size: int, position: int) -> bytes:
    """Read up to `size` bytes at `position`; shorter only at end of file."""
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def pread_exact(fd: int, size: int, position: int) -> bytes:
    data = pread_upto(fd, size, position)
    if len(data) != size:
        raise EOFError(f"short read: wanted {size} bytes at {position}, got {len(data)}")
    return data
