"""The admin tools' connection to one broker: a blocking socket that negotiates versions with
ApiVersions and sends each request at the highest version both sides know (within what the client
can fill, `CLIENT_VERSIONS`), and the errors every admin call raises. Reads are bounded (a
response is at most 100 MiB) and sockets time out, so a dead, slow or hostile peer ends in an
`AdminError`, never a hang. A secured listener's TLS and SASL (`--command-config`) are
`security.py`'s: the connection wraps its socket with it and lets it authenticate right after
ApiVersions, before any other request.
"""

from __future__ import annotations

import base64
import itertools
import socket
import struct
from typing import Any

from kio.schema.errors import ErrorCode

from kbroker.wire.protocol import ProtocolError, api_name, decode_response, encode_request, known_versions

MAX_RESPONSE_BYTES = 100 * 1024 * 1024
DEFAULT_TIMEOUT_S = 30.0
CLIENT_ID = "kbroker-admin"

LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 2, 3, 8, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS, DELETE_GROUPS = 15, 16, 18, 42
CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 32, 37, 44
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
DESCRIBE_LOG_DIRS = 35
DESCRIBE_CLUSTER = 60
CONSUMER_GROUP_DESCRIBE = 69
ELECT_LEADERS = 43
WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 27, 61, 65, 66
PRODUCE, FETCH = 0, 1
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
EARLIEST, LATEST = -2, -1  # ListOffsets timestamps

# The versions this client knows how to fill and read, per API: where a newer version changes the
# shape (OffsetFetch/OffsetCommit v10 name topics by id) the range stops before it.
CLIENT_VERSIONS = {
    LIST_OFFSETS: (1, 11),
    METADATA: (1, 13),  # v0 reads an empty topic list as "all topics"
    OFFSET_COMMIT: (2, 9),
    OFFSET_FETCH: (2, 9),  # v2 is the first where null topics means "every committed partition"
    FIND_COORDINATOR: (0, 6),
    DESCRIBE_GROUPS: (0, 6),
    LIST_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    CREATE_TOPICS: (2, 7),  # -1 partitions / replication factor (the broker's defaults) from v4
    DELETE_TOPICS: (1, 6),
    CREATE_PARTITIONS: (0, 3),
    DESCRIBE_CONFIGS: (1, 4),  # v1 is the first with each config's source
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    LIST_PARTITION_REASSIGNMENTS: (0, 0),
    DESCRIBE_LOG_DIRS: (1, 4),
    DESCRIBE_CLUSTER: (0, 1),
    CONSUMER_GROUP_DESCRIBE: (0, 1),
    ELECT_LEADERS: (1, 2),
    WRITE_TXN_MARKERS: (1, 1),
    DESCRIBE_PRODUCERS: (0, 0),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 1),
    PRODUCE: (3, 9),
    FETCH: (4, 12),  # v13 names topics by id
    SASL_HANDSHAKE: (1, 1),  # v0 sends the tokens unframed
    SASL_AUTHENTICATE: (0, 2),
}
_API_VERSIONS_RESPONSE_PREFIX = struct.Struct(">ih")  # correlation id, error_code: the same in every version


class AdminError(Exception):
    """A failure reported as one line on stderr; the command exits with status 1."""


class ConnectionLost(AdminError):
    """The broker closed or reset the connection."""


class KafkaErrorResponse(AdminError):
    """The broker answered with an error code."""

    def __init__(self, code: int, what: str, message: str | None = None) -> None:
        self.code = int(code)
        self.name = error_name(code)
        detail = f" ({message})" if message else ""
        super().__init__(f"{what}: {self.name}{detail}")


def error_name(code: int) -> str:
    """Kafka's name for an error code, e.g. NOT_COORDINATOR."""
    try:
        return ErrorCode(int(code)).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{int(code)}"


def kafka_uuid(value: Any) -> str | None:
    """A topic id as Kafka's tools print it (URL-safe base64 of the 16 bytes, no padding); None for
    an absent or all-zero id."""
    if value is None or not value.int:
        return None
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise AdminError(f"invalid broker address {address!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


class Connection:
    """One broker connection: framing, correlation ids, versions. Not thread-safe."""

    def __init__(self, host: str, port: int, timeout: float = DEFAULT_TIMEOUT_S, security: Any = None) -> None:
        """`security`: a `security.ClientSecurity` for a TLS or SASL listener (None: PLAINTEXT)."""
        self.host, self.port, self.timeout = host, port, timeout
        self.address = f"{host}:{port}"
        self.security = security
        self._correlation = itertools.count(1)
        self._answered = 0  # requests answered after ApiVersions
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise AdminError(f"cannot connect to {self.address}: {_reason(exc)}") from None
        self._sock.settimeout(timeout)
        try:
            if security is not None:
                self._sock = security.wrap(self._sock, host, self.address)
            self.versions = self._negotiate()
            if security is not None:
                security.authenticate(self)
        except ConnectionLost as exc:
            self.close()
            if security is None and not hasattr(self, "versions"):  # a TLS listener drops a plaintext hello
                raise ConnectionLost(f"{exc} (if it is an SSL or SASL_SSL listener, give its client settings "
                                     f"with --command-config)") from None
            raise
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def version(self, api_key: int) -> int:
        """The highest version of `api_key` this client, kio and the broker all know."""
        lo, hi = CLIENT_VERSIONS[api_key]
        known = known_versions(api_key)
        hi = min(hi, known[-1])
        served = self.versions.get(api_key)
        if served is None:
            raise AdminError(f"the broker at {self.address} does not serve {api_name(api_key)}")
        v = min(hi, served[1])
        if v < max(lo, served[0]):
            raise AdminError(f"the broker at {self.address} serves {api_name(api_key)} versions "
                             f"{served[0]}-{served[1]}; this client needs {lo}-{hi}")
        return v

    def call(self, api_key: int, data: dict[str, Any], version: int | None = None,
             client_id: str = CLIENT_ID) -> Any:
        """Send one request at the negotiated version and return the decoded response body."""
        if version is None:
            version = self.version(api_key)
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        try:
            self._send(encode_request(api_key, version, correlation_id, client_id, data))
            frame = self._receive()
        except ConnectionLost as exc:
            if not self._answered and getattr(self.security, "mechanism", None) is None:  # the first request
                raise ConnectionLost(f"{exc} (a SASL listener closes connections that have not authenticated: "
                                     f"give its client settings with --command-config)") from None
            raise
        self._answered += 1
        return self._decode(api_key, version, frame, correlation_id)

    def _decode(self, api_key: int, version: int, frame: bytes, correlation_id: int) -> Any:
        try:
            got, body = decode_response(api_key, version, frame)
        except ProtocolError as exc:
            raise AdminError(f"{self.address}: {exc}") from None
        if got != correlation_id:
            raise AdminError(f"{self.address}: response correlation id {got} != {correlation_id}")
        return body

    def _negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions at the newest version kio knows; a broker that does not know it answers
        UNSUPPORTED_VERSION with a v0 body listing what it serves, and we ask again at that."""
        version = known_versions(API_VERSIONS)[-1]
        for _attempt in range(2):
            correlation_id = next(self._correlation)
            self._send(encode_request(API_VERSIONS, version, correlation_id, CLIENT_ID,
                                      {"client_software_name": "kbroker-admin", "client_software_version": "1"}))
            frame = self._receive()
            if len(frame) >= _API_VERSIONS_RESPONSE_PREFIX.size:
                _corr, error = _API_VERSIONS_RESPONSE_PREFIX.unpack_from(frame, 0)
                if error == ErrorCode.unsupported_version and version > 0:
                    served = self._decode_api_versions(0, frame, correlation_id, check_error=False)
                    mine = served.get(API_VERSIONS, (0, 0))
                    version = max(0, min(mine[1], version - 1))
                    continue
            return self._decode_api_versions(version, frame, correlation_id)
        raise AdminError(f"{self.address}: ApiVersions negotiation did not converge")

    def _decode_api_versions(self, version: int, frame: bytes, correlation_id: int,
                             check_error: bool = True) -> dict[int, tuple[int, int]]:
        body = self._decode(API_VERSIONS, version, frame, correlation_id)
        if check_error and body.error_code != ErrorCode.none:
            raise KafkaErrorResponse(body.error_code, f"ApiVersions from {self.address}")
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise ConnectionLost(f"{self.address}: send failed: {_reason(exc)}") from None

    def _receive(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        if size < 4 or size > MAX_RESPONSE_BYTES:
            raise AdminError(f"{self.address}: response size {size} is outside 4..{MAX_RESPONSE_BYTES} bytes")
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            try:
                k = self._sock.recv_into(view[got:])
            except OSError as exc:
                if isinstance(exc, socket.timeout):
                    raise AdminError(f"{self.address}: receive failed: {_reason(exc)}") from None
                raise ConnectionLost(f"{self.address}: receive failed: {_reason(exc)}") from None
            if k == 0:
                raise ConnectionLost(f"{self.address}: connection closed by the broker")
            got += k
        return bytes(buf)


def _reason(exc: OSError) -> str:
    if isinstance(exc, socket.timeout):
        return "timed out"
    return exc.strerror or str(exc) or type(exc).__name__
