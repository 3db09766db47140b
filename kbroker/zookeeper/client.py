"""The ZooKeeper adapter: the only module that imports kazoo.

Blocking calls, meant to run in a worker thread (`trio.to_thread.run_sync`); kazoo's exceptions
become the `znodes` ones so nothing above this module knows kazoo. Watches and session-state
changes call plain callbacks on kazoo's own threads: callers must only hand them to trio from
there (`trio.from_thread.run_sync` / `TrioToken.run_sync_soon`), never touch broker state.
`get_many` reads in ZooKeeper's multi-read requests (OpCode.multiRead, ZooKeeper 3.6+; one request
and one answer per READ_BATCH paths; pipelined single reads where the server has no multi-read) and
`set_many` writes in multi-op transactions of WRITE_BATCH conditional writes, which is what lets a
controller read and write ten thousand partition states in a fraction of a second (pipelined single
requests took two to three seconds each way: the per-request work of kazoo's threads).
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, NamedTuple

from kazoo.client import KazooClient, KazooState, _prefix_root
from kazoo.exceptions import (
    EXCEPTIONS as _EXCEPTIONS,
    BadVersionError as _BadVersion,
    KazooException,
    NodeExistsError as _NodeExists,
    NoNodeError as _NoNode,
    NotEmptyError as _NotEmpty,
    UnimplementedError as _Unimplemented,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import MultiHeader, int_struct, multiheader_struct, read_buffer, stat_struct, write_string
from kazoo.protocol.states import ZnodeStat
from kazoo.retry import KazooRetry

from kbroker.zookeeper.znodes import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, ZkError

logger = logging.getLogger(__name__)

Watch = Callable[[], None]


class Stat(NamedTuple):
    version: int
    czxid: int
    ephemeral_owner: int


def _translate(exc: BaseException) -> BaseException:
    if isinstance(exc, _NoNode):
        return NoNodeError(str(exc) or "no node")
    if isinstance(exc, _NodeExists):
        return NodeExistsError(str(exc) or "node exists")
    if isinstance(exc, _BadVersion):
        return BadVersionError(str(exc) or "bad version")
    if isinstance(exc, _NotEmpty):
        return NotEmptyError(str(exc) or "not empty")
    if isinstance(exc, (KazooException, KazooTimeoutError)):
        return ZkError(f"{type(exc).__name__}: {exc}")
    return exc


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - translated, not swallowed
        translated = _translate(exc)
        if translated is exc:
            raise
        raise translated from exc


def _stat(s) -> Stat:
    return Stat(s.version, s.czxid, s.ephemeralOwner)


READ_BATCH = 200   # paths per multi-read (a topic's assignment znode is ~2 KB: answers stay far below 1 MB)
WRITE_BATCH = 200  # conditional writes per multi-op transaction
_GET_DATA = 4      # ZooDefs.OpCode.getData


class _MultiRead:
    """ZooKeeper's multiRead request (OpCode 22) of getData operations, without watches, in kazoo's
    request protocol (`type`, `serialize`, `deserialize`). Not atomic: every path answers for itself,
    its (data, ZnodeStat) or kazoo's exception for its error (NoNodeError)."""

    type = 22

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def serialize(self) -> bytearray:
        out = bytearray()
        for path in self.paths:
            out += MultiHeader(_GET_DATA, False, -1).serialize() + write_string(path) + b"\x00"
        return out + multiheader_struct.pack(-1, True, -1)

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list:
        results: list = []
        while True:
            header, offset = MultiHeader.deserialize(data, offset)
            if header.done:
                return results
            if header.type == _GET_DATA:
                value, offset = read_buffer(data, offset)
                results.append((value, ZnodeStat._make(stat_struct.unpack_from(data, offset))))
                offset += stat_struct.size
            else:  # an error result: its code
                code = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                results.append(_EXCEPTIONS[code]())


class ZkClient:
    """One ZooKeeper session. `connect_string` may carry a chroot (`host:port/kbroker`)."""

    def __init__(self, connect_string: str, session_timeout_ms: int, connection_timeout_ms: int = 18000) -> None:
        self.connect_string = connect_string
        self.connection_timeout_s = connection_timeout_ms / 1000
        # Retries cover a dropped connection only; session expiry is the caller's business.
        self._kazoo = KazooClient(hosts=connect_string, timeout=session_timeout_ms / 1000,
                                  connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
                                  command_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=1.0,
                                                           ignore_expire=False))
        self._state_listeners: list[Callable[[str], None]] = []
        self._kazoo.add_listener(self._on_state)
        self._multi_read = True  # until a server answers that it has no multi-read (before 3.6)

    # -- session ----------------------------------------------------------------------------------
    def start(self) -> None:
        chroot = self._kazoo.chroot
        if chroot:  # Kafka creates the chroot itself
            root = KazooClient(hosts=self.connect_string.split("/", 1)[0], timeout=self._kazoo._session_timeout / 1000)
            _call(root.start, timeout=self.connection_timeout_s)
            try:
                _call(root.ensure_path, chroot)
            finally:
                root.stop()
                root.close()
        _call(self._kazoo.start, timeout=self.connection_timeout_s)

    def close(self) -> None:
        try:
            self._kazoo.stop()
            self._kazoo.close()
        except Exception:  # noqa: BLE001 - closing a broken session is best effort
            logger.debug("closing the ZooKeeper session failed", exc_info=True)

    @property
    def session_id(self) -> int:
        client_id = self._kazoo.client_id
        return client_id[0] if client_id else 0

    @property
    def connected(self) -> bool:
        return self._kazoo.connected

    def add_state_listener(self, listener: Callable[[str], None]) -> None:
        """`listener("LOST" | "SUSPENDED" | "CONNECTED")` on kazoo's thread; LOST = session expired."""
        self._state_listeners.append(listener)

    def _on_state(self, state) -> None:
        name = {KazooState.LOST: "LOST", KazooState.SUSPENDED: "SUSPENDED"}.get(state, "CONNECTED")
        for listener in self._state_listeners:
            try:
                listener(name)
            except Exception:  # noqa: BLE001 - a listener bug must not kill kazoo's thread
                logger.exception("ZooKeeper state listener failed")

    def restart_session(self) -> None:
        """After expiry: a fresh session (ephemeral nodes must then be created again)."""
        _call(self._kazoo.restart)

    # -- single operations --------------------------------------------------------------------------
    def ensure_path(self, path: str) -> None:
        _call(self._kazoo.ensure_path, path)

    def exists(self, path: str, watch: Watch | None = None) -> Stat | None:
        s = _call(self._kazoo.exists, path, watch=_wrap(watch))
        return None if s is None else _stat(s)

    def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, Stat]:
        data, s = _call(self._kazoo.get, path, watch=_wrap(watch))
        return data or b"", _stat(s)

    def children(self, path: str, watch: Watch | None = None) -> list[str]:
        return list(_call(self._kazoo.get_children, path, watch=_wrap(watch)))

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
               makepath: bool = False) -> str:
        return _call(self._kazoo.create, path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath)

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        return _stat(_call(self._kazoo.set, path, data, version=version))

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        _call(self._kazoo.delete, path, version=version, recursive=recursive)

    def create_all(self, nodes: Iterable[tuple[str, bytes]]) -> None:
        """Create several persistent znodes atomically (one multi-op)."""
        txn = self._kazoo.transaction()
        for path, data in nodes:
            txn.create(path, data)
        results = _call(txn.commit)
        for result in results:
            if isinstance(result, Exception):
                raise _translate(result)

    def set_checked(self, path: str, data: bytes, check_path: str, check_version: int) -> None:
        """Write `path` only while `check_path` is at `check_version` (one multi-op): how a
        controller fences its writes with the controller epoch znode, as Kafka does."""
        txn = self._kazoo.transaction()
        txn.check(check_path, check_version)
        txn.set_data(path, data)
        for result in _call(txn.commit):
            if isinstance(result, Exception):
                raise _translate(result)

    # -- pipelined operations -----------------------------------------------------------------------
    def get_many(self, paths: list[str]) -> list[tuple[bytes, Stat] | None]:
        """Data and stat of each path (None where it does not exist), one round trip's latency."""
        if self._multi_read and len(paths) > 1:
            batches = [paths[i:i + READ_BATCH] for i in range(0, len(paths), READ_BATCH)]
            pending = []
            for batch in batches:
                result = self._kazoo.handler.async_result()
                self._kazoo._call(_MultiRead([_prefix_root(self._kazoo.chroot, p) for p in batch]), result)
                pending.append(result)
            out: list[tuple[bytes, Stat] | None] = []
            try:
                for result in pending:
                    for item in _call(result.get, timeout=self.connection_timeout_s):
                        if isinstance(item, _NoNode):
                            out.append(None)
                        elif isinstance(item, Exception):
                            raise _translate(item)
                        else:
                            out.append((item[0] or b"", _stat(item[1])))
                return out
            except ZkError as exc:
                if not isinstance(exc.__cause__, _Unimplemented):
                    raise
                logger.info("ZooKeeper has no multi-read (before 3.6): reading znodes one request each")
                self._multi_read = False
        pending = [self._kazoo.get_async(p) for p in paths]
        out = []
        for result in pending:
            try:
                data, s = _call(result.get, timeout=self.connection_timeout_s)
                out.append((data or b"", _stat(s)))
            except NoNodeError:
                out.append(None)
        return out

    def set_many(self, writes: list[tuple[str, bytes, int]]) -> list[Stat | ZkError]:
        """Conditional writes (path, data, expected version); each result is the new stat or the error.
        They go in multi-op transactions of WRITE_BATCH; a transaction that fails as a whole (one of
        its versions was stale) is written again one request per path, so each gets its own answer."""
        batches = [writes[i:i + WRITE_BATCH] for i in range(0, len(writes), WRITE_BATCH)]
        pending = []
        for batch in batches:
            txn = self._kazoo.transaction()
            for path, data, version in batch:
                txn.set_data(path, data, version)
            pending.append(txn.commit_async())
        out: list[Stat | ZkError] = []
        for batch, result in zip(batches, pending):
            try:
                answers = _call(result.get, timeout=self.connection_timeout_s)
            except ZkError:
                answers = None
            if answers is not None and len(answers) == len(batch) \
                    and not any(isinstance(a, Exception) for a in answers):
                out += [_stat(a) for a in answers]
                continue
            singles = [self._kazoo.set_async(p, d, version=v) for p, d, v in batch]  # nothing of it was applied
            out += [self._result(r, _stat) for r in singles]
        return out

    def create_many(self, creates: list[tuple[str, bytes]]) -> list[str | ZkError]:
        """Persistent creates (parents made as needed); each result is the path or the error."""
        pending = [self._kazoo.create_async(p, d, makepath=True) for p, d in creates]
        return [self._result(r, lambda x: x) for r in pending]

    def _result(self, result, convert):
        try:
            return convert(_call(result.get, timeout=self.connection_timeout_s))
        except ZkError as exc:
            return exc


def _wrap(watch: Watch | None):
    if watch is None:
        return None

    def on_event(_event) -> None:
        try:
            watch()
        except Exception:  # noqa: BLE001 - a watch bug must not kill kazoo's thread
            logger.exception("ZooKeeper watch callback failed")

    return on_event
