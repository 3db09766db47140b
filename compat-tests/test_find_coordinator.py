"""FindCoordinator over TCP, every advertised version: v0-3 one key, v4+ batched keys, both key
types (group, transaction); unknown key types are refused per key."""

from __future__ import annotations

import io
import socket
import struct

import pytest

pytestmark = pytest.mark.timeout(60)


def _call(kbroker, version, body):
    from kio.index import load_request_schema, load_response_schema
    from kio.serial import entity_reader, entity_writer

    from kbroker.wire.protocol import build

    req_cls = load_request_schema(10, version)
    out = io.BytesIO()
    out.write(struct.pack(">hhih", 10, version, 42, 6) + b"compat")
    if req_cls.__flexible__:
        out.write(b"\0")
    entity_writer(req_cls)(out, build(req_cls, body))
    payload = out.getvalue()
    with socket.create_connection((kbroker.host, kbroker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        data = sock.recv(size, socket.MSG_WAITALL)
    assert struct.unpack_from(">i", data)[0] == 42
    resp_cls = load_response_schema(10, version)
    return entity_reader(resp_cls)(memoryview(data), 5 if resp_cls.__flexible__ else 4)[0]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_single_key_versions(kbroker, version):
    body = {"key": "some-group", "key_type": 0}
    response = _call(kbroker, version, body)
    assert (response.error_code, response.node_id, response.host, response.port) == (0, 0, kbroker.host, kbroker.port)


@pytest.mark.parametrize("version", [4, 5, 6])
def test_batched_keys(kbroker, version):
    response = _call(kbroker, version, {"key_type": 1, "coordinator_keys": ["txn-a", "txn-b"]})
    assert [(c.key, c.error_code, c.node_id, c.port) for c in response.coordinators] == [
        ("txn-a", 0, 0, kbroker.port), ("txn-b", 0, 0, kbroker.port)]
    bad = _call(kbroker, version, {"key_type": 7, "coordinator_keys": ["x"]})
    assert bad.coordinators[0].error_code == 42  # INVALID_REQUEST
