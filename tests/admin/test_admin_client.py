"""The admin client against fake brokers on local sockets: version negotiation (including a broker
that does not know the newest ApiVersions), and every way a peer can fail ending in AdminError with
a useful message: refused, silent, oversized, garbage, error codes by Kafka name."""

import socket
import struct
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.admin.client import (API_VERSIONS, CLIENT_VERSIONS, DESCRIBE_CLUSTER, DESCRIBE_GROUPS, FIND_COORDINATOR, LIST_GROUPS,
                                  AdminClient, AdminError, Connection, KafkaErrorResponse, error_name)
from kbroker.cli import main
from kbroker.wire.protocol import (ProtocolError, RequestHeader, build_response, decode_request, decode_response,
                                   encode_request, encode_response, parse_request_header)

SERVED = {API_VERSIONS: (0, 4), FIND_COORDINATOR: (0, 6), DESCRIBE_GROUPS: (0, 5), LIST_GROUPS: (0, 5), 3: (0, 12)}


class FakeBroker:
    """Answers each request frame with `handler(header, body, port)`: a dict (a response body), raw
    bytes (sent as they are), or None (say nothing)."""

    def __init__(self, handler):
        self.handler = handler
        self.requests: list[tuple[int, int]] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{self.port}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn):
        with conn:
            while True:
                try:
                    raw = conn.recv(4, socket.MSG_WAITALL)
                    if len(raw) < 4:
                        return
                    frame = conn.recv(struct.unpack(">i", raw)[0], socket.MSG_WAITALL)
                except OSError:
                    return
                header, pos = parse_request_header(frame)
                self.requests.append((header.api_key, header.api_version))
                body = decode_request(header, frame, pos)
                answer = self.handler(header, body, self.port)
                if answer is None:
                    time.sleep(5)
                    return
                if isinstance(answer, dict):
                    answer = encode_response(header, build_response(header, answer))
                conn.sendall(answer)

    def close(self):
        self.sock.close()


def api_versions(header, served=SERVED):
    return {"error_code": 0, "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                                          for k, (lo, hi) in served.items()]}


@pytest.fixture
def fake():
    brokers = []

    def start(handler):
        b = FakeBroker(handler)
        brokers.append(b)
        return b

    yield start
    for b in brokers:
        b.close()


def test_versions_are_the_highest_both_sides_know(fake):
    b = fake(lambda h, body, port: api_versions(h))
    conn = Connection("127.0.0.1", b.port, timeout=5)
    assert conn.version(DESCRIBE_GROUPS) == 5  # broker's max below ours
    assert conn.version(FIND_COORDINATOR) == 6
    with pytest.raises(AdminError, match="does not serve OffsetCommit|does not serve offset_commit"):
        conn.version(8)
    conn.close()


def test_old_api_versions_is_negotiated_down(fake):
    def handler(h, body, port):
        if h.api_version > 2:  # as a broker that knows ApiVersions 0-2: error 35, v0 body
            return encode_response(RequestHeader(18, 0, h.correlation_id, None, False),
                                   build_response(RequestHeader(18, 0, 0, None, False),
                                                  {"error_code": 35, "api_keys": [
                                                      {"api_key": 18, "min_version": 0, "max_version": 2}]}))
        return api_versions(h, {API_VERSIONS: (0, 2), DESCRIBE_GROUPS: (0, 1)})

    b = fake(handler)
    conn = Connection("127.0.0.1", b.port, timeout=5)
    assert conn.versions[DESCRIBE_GROUPS] == (0, 1)
    assert [v for k, v in b.requests] == [4, 2]
    conn.close()


def test_group_requests_go_to_the_coordinator_and_errors_are_named(fake):
    def coordinator_handler(h, body, port):
        if h.api_key == API_VERSIONS:
            return api_versions(h)
        return {"groups": [{"error_code": 0, "group_id": "g", "group_state": "Stable", "protocol_type": "consumer",
                            "protocol_data": "range", "members": []}]}

    coord = fake(coordinator_handler)

    def bootstrap_handler(h, body, port):
        if h.api_key == API_VERSIONS:
            return api_versions(h)
        assert h.api_key == FIND_COORDINATOR
        keys = list(getattr(body, "coordinator_keys", None) or [body.key])
        if keys == ["missing"]:
            return {"coordinators": [{"key": "missing", "error_code": 30, "node_id": -1, "host": "", "port": -1}],
                    "error_code": 30}
        return {"coordinators": [{"key": "g", "node_id": 1, "host": "127.0.0.1", "port": coord.port}],
                "node_id": 1, "host": "127.0.0.1", "port": coord.port}

    boot = fake(bootstrap_handler)
    with AdminClient(boot.bootstrap, timeout=5) as client:
        desc = client.describe_group("g")
        assert (desc.state, desc.protocol, desc.coordinator.port) == ("Stable", "range", coord.port)
        assert (DESCRIBE_GROUPS, 5) in coord.requests
        with pytest.raises(KafkaErrorResponse, match="GROUP_AUTHORIZATION_FAILED"):
            client.describe_group("missing")


def test_a_loading_coordinator_is_retried(fake):
    calls = []

    def handler(h, body, port):
        if h.api_key == API_VERSIONS:
            return api_versions(h)
        if h.api_key == FIND_COORDINATOR:
            return {"coordinators": [{"key": "g", "node_id": 0, "host": "127.0.0.1", "port": port}]}
        calls.append(1)
        code = 14 if len(calls) < 3 else 0  # COORDINATOR_LOAD_IN_PROGRESS twice
        return {"groups": [{"error_code": code, "group_id": "g", "group_state": "Empty", "protocol_type": "",
                            "protocol_data": "", "members": []}]}

    b = fake(handler)
    with AdminClient(b.bootstrap, timeout=5) as client:
        assert client.describe_group("g").state == "Empty"
    assert len(calls) == 3


def test_broker_down_is_one_line_and_exit_1(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        assert main(["groups", "list", "--bootstrap-server", f"127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kbroker groups: cannot connect to 127.0.0.1:") and err.count("\n") == 1


def test_a_silent_broker_times_out(fake):
    b = fake(lambda h, body, port: None)
    t0 = time.monotonic()
    with pytest.raises(AdminError, match="timed out"):
        Connection("127.0.0.1", b.port, timeout=0.5)
    assert time.monotonic() - t0 < 4


def test_oversized_response_is_refused_without_reading_it(fake):
    b = fake(lambda h, body, port: struct.pack(">ii", 200 * 1024 * 1024, h.correlation_id))
    with pytest.raises(AdminError, match="response size 209715200"):
        Connection("127.0.0.1", b.port, timeout=5)


def test_garbage_and_forged_counts_are_refused(fake):
    # ApiVersions v4 body: error 0 then a compact array claiming 2**28 entries
    b = fake(lambda h, body, port: struct.pack(">iih", 6 + 5, h.correlation_id, 0) + b"\xff\xff\xff\xff\x01")
    with pytest.raises(AdminError, match="malformed"):
        Connection("127.0.0.1", b.port, timeout=5)


def test_wrong_correlation_id_is_refused(fake):
    def handler(h, body, port):
        return encode_response(h._replace(correlation_id=h.correlation_id + 1), build_response(h, api_versions(h)))

    b = fake(handler)
    with pytest.raises(AdminError, match="correlation id"):
        Connection("127.0.0.1", b.port, timeout=5)


def test_encode_request_decode_response_round_trip():
    for key, (lo, hi) in CLIENT_VERSIONS.items():
        for version in (lo, hi):
            frame = encode_request(key, version, 7, "c", {})
            header, pos = parse_request_header(frame[4:])
            assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (key, version, 7, "c")
            decode_request(header, frame[4:], pos)
            response = encode_response(header, build_response(header, {}))
            assert decode_response(key, version, response[4:])[0] == 7
    with pytest.raises(ProtocolError):
        decode_response(DESCRIBE_GROUPS, 5, b"\x00\x00\x00\x07\x00")


def test_error_names():
    assert error_name(16) == "NOT_COORDINATOR"
    assert error_name(68) == "NON_EMPTY_GROUP"
    assert error_name(31337) == "UNKNOWN_ERROR_CODE_31337"


RESPONSES = [(key, v) for key, (lo, hi) in sorted(CLIENT_VERSIONS.items()) for v in range(lo, hi + 1)]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(RESPONSES), st.binary(max_size=120), st.data())
def test_garbage_responses_are_a_protocol_error(api, garbage, data):
    # whatever a peer sends (here: a correlation id and garbage, or a real body cut and flipped),
    # decoding ends in the response or ProtocolError, never a huge allocation or another exception
    key, version = api
    if data.draw(st.booleans()):
        frame = encode_response(RequestHeader(key, version, 1, None, False), build_response(
            RequestHeader(key, version, 1, None, False), {}))[4:]
        frame = bytearray(frame + garbage)
        if frame:
            i = data.draw(st.integers(0, len(frame) - 1))
            frame[i] ^= data.draw(st.integers(1, 255))
        frame = bytes(frame[:data.draw(st.integers(0, len(frame)))])
    else:
        frame = struct.pack(">i", 1) + garbage
    try:
        decode_response(key, version, frame)
    except ProtocolError:
        pass


def test_describe_cluster_asks_describe_cluster_or_falls_back_to_metadata(fake):
    def handler(h, body, port, served):
        if h.api_key == API_VERSIONS:
            return api_versions(h, served)
        brokers = [{"broker_id": 7, "node_id": 7, "host": "127.0.0.1", "port": port, "rack": "r1"}]
        if h.api_key == DESCRIBE_CLUSTER:
            return {"error_code": 0, "cluster_id": "from-describe", "controller_id": 7, "brokers": brokers}
        return {"brokers": brokers, "cluster_id": "from-metadata", "controller_id": 7, "topics": []}

    with_it = fake(lambda h, body, port: handler(h, body, port, {**SERVED, DESCRIBE_CLUSTER: (0, 1)}))
    without = fake(lambda h, body, port: handler(h, body, port, SERVED))
    for b, cluster_id in ((with_it, "from-describe"), (without, "from-metadata")):
        with AdminClient(b.bootstrap, timeout=5) as admin:
            cluster = admin.describe_cluster()
        assert cluster.cluster_id == cluster_id and cluster.controller_id == 7
        assert cluster.brokers[7].rack == "r1" and cluster.brokers[7].port == b.port
    assert (DESCRIBE_CLUSTER, 1) in with_it.requests and (3, 12) in without.requests
