"""The admin client's plumbing: its connections (one per broker, opened on first use) and how a
request finds the broker that must answer it, as Kafka's admin client routes them. Any broker for
Metadata and DescribeCluster; the group's coordinator (FindCoordinator, looked up again and
retried while it loads, moves or cannot be reached); the controller Metadata names (looked up
again on NOT_CONTROLLER); each partition's leader (ListOffsets, retried once a moved leader is
known). The calls themselves are `topic_calls.py`, `group_calls.py` and `share_calls.py`, mixed
into `client.AdminClient`; the sockets, version negotiation and errors are `connection.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Self

from kio.schema.errors import ErrorCode

from kbroker.admin.connection import (
    DEFAULT_TIMEOUT_S,
    DESCRIBE_CLUSTER,
    FIND_COORDINATOR,
    LIST_OFFSETS,
    METADATA,
    AdminError,
    Connection,
    KafkaErrorResponse,
    parse_address,
)
from kbroker.admin.values import Broker, ClusterDescription, TopicPartition
from kbroker.wire.protocol import api_name

# Errors after which the coordinator is looked up again (Kafka's admin client does the same).
COORDINATOR_RETRIABLE = frozenset({ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                                   ErrorCode.not_coordinator})
_LEADER_RETRIABLE = {ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
                     ErrorCode.unknown_leader_epoch, ErrorCode.fenced_leader_epoch,
                     ErrorCode.offset_not_available}  # ListOffsets of a leader just elected
_CONTROLLER_RETRIABLE = {ErrorCode.not_controller}


class NotServed(AdminError):
    """The broker does not serve an API at a version this client can fill: asking again will not
    help, so the routing does not retry it."""


class RoutedClient:
    """Connections and routing; the requests are the subclasses' (`client.AdminClient`)."""

    def __init__(self, bootstrap: str, timeout: float = DEFAULT_TIMEOUT_S, security: Any = None) -> None:
        """`security`: every connection's TLS and SASL (admin/security.py's ClientSecurity), or None."""
        self.bootstrap = [parse_address(a) for a in bootstrap.split(",") if a.strip()]
        if not self.bootstrap:
            raise AdminError("no bootstrap server given")
        self.timeout, self.security = timeout, security
        self._connections: dict[tuple[str, int], Connection] = {}
        self._coordinators: dict[str, Broker] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    # -- connections --------------------------------------------------------------------------

    def connection(self, host: str, port: int) -> Connection:
        conn = self._connections.get((host, port))
        if conn is None:
            conn = self._connections[(host, port)] = Connection(host, port, self.timeout, self.security)
        return conn

    def any_connection(self) -> Connection:
        """A connection to some broker (the first that answers), for requests any broker serves."""
        return self._any()

    def _any(self) -> Connection:
        if self._connections:
            return next(iter(self._connections.values()))
        errors = []
        for host, port in self.bootstrap:
            try:
                return self.connection(host, port)
            except AdminError as exc:
                errors.append(str(exc))
        raise AdminError("; ".join(errors))

    def _drop(self, host: str, port: int) -> None:
        conn = self._connections.pop((host, port), None)
        if conn is not None:
            conn.close()

    # -- any broker: the cluster ------------------------------------------------------------------

    def metadata(self, topics: Iterable[str] | None) -> tuple[dict[int, Broker], dict[str, Any]]:
        """(brokers by id, topic name -> metadata topic entity); topics=None asks for every topic.
        Never auto-creates a topic."""
        names = None if topics is None else [{"name": t} for t in topics]
        body = self._any().call(METADATA, {"topics": names, "allow_auto_topic_creation": False})
        brokers = {b.node_id: Broker(int(b.node_id), b.host, int(b.port)) for b in body.brokers}
        return brokers, {t.name: t for t in body.topics}

    def controller(self) -> tuple[str | None, int]:
        """(cluster id, controller id; -1 when none is known) as Metadata names them."""
        body = self._any().call(METADATA, {"topics": [], "allow_auto_topic_creation": False})
        return getattr(body, "cluster_id", None), int(body.controller_id)

    def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller and live brokers (with racks): DescribeCluster where the broker
        serves it (Kafka's admin client asks it so), Metadata otherwise."""
        conn = self._any()
        if DESCRIBE_CLUSTER not in conn.versions:
            body = conn.call(METADATA, {"topics": [], "allow_auto_topic_creation": False})
            brokers = {int(b.node_id): Broker(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
                       for b in body.brokers}
            return ClusterDescription(getattr(body, "cluster_id", None), int(body.controller_id), brokers)
        body = conn.call(DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
        if body.error_code != ErrorCode.none:
            raise KafkaErrorResponse(body.error_code, "DescribeCluster", body.error_message)
        brokers = {int(b.broker_id): Broker(int(b.broker_id), b.host, int(b.port), b.rack) for b in body.brokers}
        return ClusterDescription(body.cluster_id, int(body.controller_id), brokers)

    def serves(self, api_key: int) -> bool:
        """Whether the broker this client talks to serves `api_key` at all."""
        return api_key in self._any().versions

    def partitions_of(self, topic: str) -> list[int]:
        _brokers, topics = self.metadata([topic])
        entry = topics.get(topic)
        if entry is None:
            raise AdminError(f"topic {topic!r} is not in the metadata answer")
        if entry.error_code != ErrorCode.none:
            raise KafkaErrorResponse(entry.error_code, f"topic {topic!r}")
        return sorted(int(p.partition_index) for p in entry.partitions)

    # -- the controller ---------------------------------------------------------------------------

    def _controller_call(self, api_key: int, data: dict[str, Any], codes_of) -> Any:
        """Call the controller Metadata names (any broker when it names none we know), as Kafka's
        admin client sends topic changes; NOT_CONTROLLER looks it up again until the timeout."""
        deadline = time.monotonic() + self.timeout
        backoff = 0.05
        while True:
            body = self._any().call(METADATA, {"topics": [], "allow_auto_topic_creation": False})
            controller = next((b for b in body.brokers if b.node_id == body.controller_id), None)
            try:
                conn = self.connection(controller.host, int(controller.port)) if controller is not None else self._any()
                body = conn.call(api_key, data)
            except AdminError:
                # A controller that just died stays named until its ZooKeeper session expires.
                if controller is None or time.monotonic() + backoff > deadline:
                    raise
                self._drop(controller.host, int(controller.port))
            else:
                code = next((c for c in codes_of(body) if c in _CONTROLLER_RETRIABLE), None)
                if code is None:
                    return body
                if time.monotonic() + backoff > deadline:
                    raise KafkaErrorResponse(code, f"{api_name(api_key)} (gave up after {self.timeout:g} s)")
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def _request_timeout_ms(self) -> int:
        """How long the broker may take (a little under our socket timeout, so its answer arrives)."""
        return max(int(self.timeout * 800), 1)

    # -- a group's coordinator --------------------------------------------------------------------

    def find_coordinator(self, group: str) -> Broker:
        cached = self._coordinators.get(group)
        if cached is not None:
            return cached
        conn = self._any()
        version = conn.version(FIND_COORDINATOR)
        body = conn.call(FIND_COORDINATOR, {"key": group, "key_type": 0, "coordinator_keys": [group]}, version)
        answer = body.coordinators[0] if version >= 4 else body
        if version >= 4 and len(body.coordinators) != 1:
            raise AdminError(f"FindCoordinator answered {len(body.coordinators)} coordinators for one group")
        if answer.error_code != ErrorCode.none:
            raise KafkaErrorResponse(answer.error_code, f"FindCoordinator for group {group!r}",
                                     getattr(answer, "error_message", None))
        broker = Broker(int(answer.node_id), answer.host, int(answer.port))
        self._coordinators[group] = broker
        return broker

    def _group_call(self, group: str, api_key: int, data: dict[str, Any], error_of,
                    version_of: Callable[[Connection], int] | None = None) -> tuple[Any, Broker]:
        """Call the group's coordinator; `error_of(body)` gives the group-level error code. While
        the coordinator loads, has moved or cannot be reached, look it up again and retry until
        the timeout. `version_of(connection)`: the version to send (None: the negotiated one); it
        raises NotServed where the coordinator does not serve one this client can fill."""
        deadline = time.monotonic() + self.timeout
        backoff = 0.05
        while True:
            coordinator = None
            try:
                coordinator = self.find_coordinator(group)
                conn = self.connection(coordinator.host, coordinator.port)
                body = conn.call(api_key, data, None if version_of is None else version_of(conn))
                code = error_of(body)
            except KafkaErrorResponse as exc:
                code, body, coordinator = exc.code, None, None
                if code not in COORDINATOR_RETRIABLE:
                    raise
            except NotServed:
                raise
            except AdminError:
                # a coordinator that just died: its group moves with its __consumer_offsets partition
                if time.monotonic() + backoff > deadline:
                    raise
                # the broken connection: the coordinator's, or the one FindCoordinator went through
                broken = (coordinator.host, coordinator.port) if coordinator else next(iter(self._connections), None)
                if broken is not None:
                    self._drop(*broken)
                code = ErrorCode.coordinator_not_available
            if code not in COORDINATOR_RETRIABLE:
                return body, coordinator
            self._coordinators.pop(group, None)
            if time.monotonic() + backoff > deadline:
                raise KafkaErrorResponse(code, f"{api_name(api_key)} for group {group!r} (gave up after "
                                               f"{self.timeout:g} s)")
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    # -- each partition's leader ------------------------------------------------------------------

    def leader_of(self, topic: str, partition: int) -> Broker:
        """The partition's leader as Metadata names it; UNKNOWN_TOPIC_OR_PARTITION (or the topic's
        error) when there is none."""
        return next(iter(self._by_leader([(topic, partition)], strict=True)))

    def list_offsets(self, partitions: Iterable[TopicPartition], timestamp: int,
                     strict: bool = True, read_committed: bool = False) -> dict[TopicPartition, int | None]:
        """ListOffsets at each partition's leader: EARLIEST, LATEST or a timestamp in ms (None when
        no record is that recent). With strict=False a partition that errors maps to None.
        read_committed: LATEST is the last stable offset."""
        wanted = sorted(set(partitions))
        out: dict[TopicPartition, int | None] = {}
        for attempt in range(3):  # a moved leader is looked up again
            retry: list[TopicPartition] = []
            for broker, tps in self._by_leader(wanted, strict).items():
                if broker is None:
                    out.update({tp: None for tp in tps})
                    continue
                topics: dict[str, list[dict[str, int]]] = {}
                for topic, partition in tps:
                    topics.setdefault(topic, []).append(
                        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp})
                body = self.connection(broker.host, broker.port).call(LIST_OFFSETS, {
                    "replica_id": -1, "isolation_level": int(read_committed), "timeout": int(self.timeout * 1000),
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
                for t in body.topics:
                    for p in t.partitions:
                        tp = (t.name, int(p.partition_index))
                        if p.error_code == ErrorCode.none:
                            out[tp] = None if p.offset < 0 else int(p.offset)
                        elif p.error_code in _LEADER_RETRIABLE and attempt < 2:
                            retry.append(tp)
                        elif strict:
                            raise KafkaErrorResponse(p.error_code, f"ListOffsets for {tp[0]}-{tp[1]}")
                        else:
                            out[tp] = None
            if not retry:
                break
            wanted = retry
            time.sleep(0.2)
        missing = [tp for tp in wanted if tp not in out]
        if missing and strict:
            raise AdminError(f"ListOffsets did not answer for {missing[0][0]}-{missing[0][1]}")
        return out

    def _by_leader(self, partitions: list[TopicPartition], strict: bool) -> dict[Broker | None, list[TopicPartition]]:
        brokers, topics = self.metadata(sorted({t for t, _ in partitions}))
        out: dict[Broker | None, list[TopicPartition]] = {}
        for tp in partitions:
            entry = topics.get(tp[0])
            leader = None
            if entry is not None and entry.error_code == ErrorCode.none:
                leader_id = next((p.leader_id for p in entry.partitions if p.partition_index == tp[1]), None)
                leader = brokers.get(leader_id) if leader_id is not None else None
            if leader is None and strict:
                if entry is not None and entry.error_code != ErrorCode.none:
                    raise KafkaErrorResponse(entry.error_code, f"topic {tp[0]!r}")
                raise KafkaErrorResponse(ErrorCode.unknown_topic_or_partition, f"partition {tp[0]}-{tp[1]}")
            out.setdefault(leader, []).append(tp)
        return out
