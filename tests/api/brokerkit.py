"""A real single-node broker in-process for the API tests that go through the dispatch table:
`start` one on a directory, `running` one with a topic for a fixture, and `ask` it one request."""

from __future__ import annotations

import functools
from typing import Iterator

import trio

from kbroker.api.dispatch import handle_frame
from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.wire.fetch_response import frame_bytes
from kbroker.wire.protocol import decode_response, encode_request


def start(path, **extra: str) -> Broker:
    b = Broker(BrokerConfig.from_dict({"log.dirs": str(path), "offsets.topic.num.partitions": "3", **extra}),
               ("127.0.0.1", 9092))
    b.startup()
    return b


def running(path, partitions: int, topic: str = "t") -> Iterator[Broker]:
    """For a fixture: a started broker with `topic`, shut down afterwards."""
    b = start(path)
    trio.run(functools.partial(b.create_topic, topic, num_partitions=partitions))
    yield b
    b.shutdown()


def ask(broker: Broker, key: int, version: int, body: dict):
    frame = encode_request(key, version, 7, "test", body)
    response = frame_bytes(trio.run(handle_frame, broker, bytearray(frame[4:])))
    correlation_id, decoded = decode_response(key, version, response[4:])
    assert correlation_id == 7
    return decoded
