import struct

import pytest
from hypothesis import given, strategies as st

from kbroker.wire.framing import FrameDecoder, FrameError, frame


@given(st.lists(st.binary(max_size=300), max_size=8), st.data())
def test_frames_survive_any_chunking(payloads, data):
    stream = b"".join(frame(p) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    decoder = FrameDecoder(max_frame_size=1000)
    received = []
    prev = 0
    for cut in cuts + [len(stream)]:
        decoder.receive_data(stream[prev:cut])
        prev = cut
        while (f := decoder.next_frame()) is not None:
            received.append(f)
    assert received == payloads
    assert decoder.buffered == 0


def test_oversized_frame_is_refused_before_buffering():
    decoder = FrameDecoder(max_frame_size=100)
    with pytest.raises(FrameError):
        decoder.receive_data(struct.pack(">i", 101))


def test_negative_size_is_refused():
    decoder = FrameDecoder(max_frame_size=100)
    with pytest.raises(FrameError):
        decoder.receive_data(struct.pack(">i", -1))


def test_oversized_second_frame_detected_once_the_first_is_taken():
    decoder = FrameDecoder(max_frame_size=10)
    decoder.receive_data(frame(b"abc") + struct.pack(">i", 11))
    with pytest.raises(FrameError):
        decoder.next_frame()  # the first frame is taken, the next size is checked at once


def test_bytes_wanted_counts_down():
    decoder = FrameDecoder(max_frame_size=100)
    assert decoder.bytes_wanted == 4
    decoder.receive_data(struct.pack(">i", 5) + b"ab")
    assert decoder.bytes_wanted == 3
    assert decoder.next_frame() is None
