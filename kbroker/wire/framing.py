"""Kafka's frame layer, sans-I/O: a 4-byte big-endian size, then that many bytes.

`FrameDecoder` has h11's shape: `receive_data(bytes)` buffers, `next_frame()` returns one whole
frame or None when more bytes are needed. The size prefix is checked before anything is buffered,
so a peer can never make the broker hold more than `max_frame_size` bytes per connection.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The peer sent something that is not a Kafka frame; the connection must be closed."""


class FrameDecoder:
    def __init__(self, max_frame_size: int, limit_name: str = "socket.request.max.bytes") -> None:
        self.max_frame_size = max_frame_size
        self.limit_name = limit_name  # the key that set the limit, for the error
        self._buffer = bytearray()
        self._expected: int | None = None

    def receive_data(self, data: bytes) -> None:
        self._buffer += data
        self._check_size()

    def _check_size(self) -> None:
        if self._expected is None and len(self._buffer) >= 4:
            (size,) = _SIZE.unpack_from(self._buffer, 0)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameError(f"frame of {size} bytes exceeds {self.limit_name}={self.max_frame_size}")
            self._expected = size

    @property
    def bytes_wanted(self) -> int:
        """How many more bytes complete the current frame (4 while waiting for a size)."""
        if self._expected is None:
            return 4 - len(self._buffer)
        return self._expected + 4 - len(self._buffer)

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def has_frame(self) -> bool:
        """Whether a whole frame is buffered (next_frame() would return it)."""
        return self._expected is not None and len(self._buffer) >= self._expected + 4

    def next_frame(self) -> bytearray | None:
        """The next whole frame (writable: the Produce path patches record batches in place)."""
        if self._expected is None or len(self._buffer) < self._expected + 4:
            return None
        end = self._expected + 4
        frame = self._buffer[4:end]
        del self._buffer[:end]
        self._expected = None
        self._check_size()
        return frame


    def begin_frame_into(self, reuse: bytearray | None = None) -> tuple[bytearray | memoryview, int]:
        """Take over the frame being received as an exact-size buffer: (buffer, bytes already in it).

        For large frames the caller then receives the rest straight into the buffer (recv_into),
        so the body is never copied again; the next frame starts from an empty decoder. `reuse`,
        when large enough, provides the memory (the caller must be done with its previous frame).
        """
        if self._expected is None:
            raise RuntimeError("no frame size received yet")
        if reuse is not None and len(reuse) >= self._expected:
            body: bytearray | memoryview = memoryview(reuse)[: self._expected]
        else:
            body = bytearray(self._expected)
        have = min(len(self._buffer) - 4, self._expected)
        body[:have] = self._buffer[4 : 4 + have]
        del self._buffer[: 4 + have]
        self._expected = None
        if self._buffer:
            raise RuntimeError("begin_frame_into with bytes of a later frame buffered")
        return body, have


def frame(payload: bytes) -> bytes:
    """Prefix `payload` with its size."""
    return _SIZE.pack(len(payload)) + payload
