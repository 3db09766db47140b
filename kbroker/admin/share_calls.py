"""The admin client's share-group calls (KIP-932 queues), each at the group's coordinator:
ShareGroupDescribe (77), DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91),
DeleteShareGroupOffsets (92); and ListGroups v5+ with types_filter ["share"] at every broker.
This module owns the versions of those APIs the client fills and reads (`SHARE_VERSIONS`): a
broker serves them only with `group.coordinator.rebalance.protocols` including `share`, and a
coordinator that does not serve them raises `routing.NotServed` saying how to turn them on.
Mixed into `client.AdminClient`; `kbroker share-groups` (share_groups.py) and the console use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kbroker.admin.connection import (
    LIST_GROUPS,
    AdminError,
    Connection,
    KafkaErrorResponse,
    kafka_uuid,
)
from kbroker.admin.routing import NotServed, RoutedClient
from kbroker.admin.values import (
    GroupListing,
    ShareGroupDescription,
    ShareMember,
    ShareOffset,
    TopicAssignment,
    TopicPartition,
)

SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 77, 90, 91, 92
# (lowest, highest) version this client fills and reads, per share API.
SHARE_VERSIONS = {SHARE_GROUP_DESCRIBE: (1, 1), DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
                  ALTER_SHARE_GROUP_OFFSETS: (0, 0), DELETE_SHARE_GROUP_OFFSETS: (0, 0)}
API_NAMES = {SHARE_GROUP_DESCRIBE: "ShareGroupDescribe", DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets",
             ALTER_SHARE_GROUP_OFFSETS: "AlterShareGroupOffsets", DELETE_SHARE_GROUP_OFFSETS: "DeleteShareGroupOffsets"}
LIST_GROUPS_TYPES_VERSION = 5  # the first ListGroups version with types_filter
SHARE_STATES = ("Empty", "Stable", "Dead")  # GroupState.groupStatesForType(SHARE), as ListGroups names them
ENABLE_HINT = "share groups are off: start the broker with group.coordinator.rebalance.protocols=classic,consumer,share"


def share_version(conn: Connection, api_key: int) -> int:
    """The highest version of a share API both this client and the broker know; NotServed
    (saying how to turn share groups on) where there is none."""
    lo, hi = SHARE_VERSIONS[api_key]
    served = conn.versions.get(api_key)
    if served is None:
        raise NotServed(f"the broker at {conn.address} does not serve {API_NAMES[api_key]} ({ENABLE_HINT})")
    version = min(hi, served[1])
    if version < max(lo, served[0]):
        raise NotServed(f"the broker at {conn.address} serves {API_NAMES[api_key]} versions "
                        f"{served[0]}-{served[1]}; this client needs {lo}-{hi}")
    return version


class ShareGroupCalls(RoutedClient):
    """Share groups: listed, described, their start offsets and lag read, altered, deleted."""

    def _share_call(self, group: str, api_key: int, data: dict[str, Any], error_of) -> tuple[Any, Any]:
        return self._group_call(group, api_key, data, error_of, lambda conn: share_version(conn, api_key))

    def list_share_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        """ListGroups v5+ with types_filter ["share"] at every broker (optionally only groups in
        `states`), sorted by group id."""
        brokers, _ = self.metadata([])
        out: dict[str, GroupListing] = {}
        for broker in sorted(brokers.values()):
            conn = self.connection(broker.host, broker.port)
            version = conn.version(LIST_GROUPS)
            if version < LIST_GROUPS_TYPES_VERSION:
                raise AdminError(f"the broker at {conn.address} serves ListGroups up to v{version}; listing share "
                                 f"groups needs v{LIST_GROUPS_TYPES_VERSION} (Kafka 4)")
            body = conn.call(LIST_GROUPS, {"states_filter": sorted(states), "types_filter": ["share"]}, version)
            if body.error_code != ErrorCode.none:
                raise KafkaErrorResponse(body.error_code, f"ListGroups from {conn.address}")
            for g in body.groups:
                out[g.group_id] = GroupListing(g.group_id, g.group_state, g.protocol_type, g.group_type or "share")
        return [out[k] for k in sorted(out)]

    def describe_share_group(self, group: str) -> ShareGroupDescription | None:
        """ShareGroupDescribe at the coordinator; None for GROUP_ID_NOT_FOUND (no such group, or a
        group of another type). Members come sorted by member id."""
        def entry_of(body: Any) -> Any:
            return _only_group(body.groups, group, "ShareGroupDescribe")

        body, coordinator = self._share_call(group, SHARE_GROUP_DESCRIBE,
                                             {"group_ids": [group], "include_authorized_operations": False},
                                             lambda b: entry_of(b).error_code)
        e = entry_of(body)
        if e.error_code == ErrorCode.group_id_not_found:
            return None
        if e.error_code != ErrorCode.none:
            raise KafkaErrorResponse(e.error_code, f"ShareGroupDescribe for group {group!r}", e.error_message)
        members = tuple(sorted((ShareMember(m.member_id, m.client_id, m.client_host, int(m.member_epoch),
                                            _assignment(m.assignment)) for m in e.members),
                               key=lambda m: m.member_id))
        return ShareGroupDescription(e.group_id, e.group_state, int(e.group_epoch), int(e.assignment_epoch),
                                     members, coordinator)

    def describe_share_group_offsets(self, group: str) -> list[ShareOffset] | None:
        """DescribeShareGroupOffsets for every partition the group has state for, sorted; None for
        GROUP_ID_NOT_FOUND. Lag is None before v1 (and where the broker does not know it)."""
        def entry_of(body: Any) -> Any:
            return _only_group(body.groups, group, "DescribeShareGroupOffsets")

        body, _ = self._share_call(group, DESCRIBE_SHARE_GROUP_OFFSETS,
                                   {"groups": [{"group_id": group, "topics": None}]},
                                   lambda b: entry_of(b).error_code)
        e = entry_of(body)
        if e.error_code == ErrorCode.group_id_not_found:
            return None
        if e.error_code != ErrorCode.none:
            raise KafkaErrorResponse(e.error_code, f"DescribeShareGroupOffsets for group {group!r}", e.error_message)
        out = []
        for t in e.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise KafkaErrorResponse(p.error_code, f"DescribeShareGroupOffsets for {t.topic_name}-"
                                                           f"{p.partition_index}", p.error_message)
                lag = getattr(p, "lag", -1)
                out.append(ShareOffset(t.topic_name, int(p.partition_index),
                                       None if p.leader_epoch < 0 else int(p.leader_epoch),
                                       None if p.start_offset < 0 else int(p.start_offset),
                                       None if lag is None or lag < 0 else int(lag)))
        return sorted(out)

    def alter_share_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """AlterShareGroupOffsets: the group's start offsets (refused with NON_EMPTY_GROUP while it
        has members)."""
        by_topic: dict[str, list[dict[str, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({"partition_index": partition, "start_offset": offset})
        data = {"group_id": group, "topics": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}
        body, _ = self._share_call(group, ALTER_SHARE_GROUP_OFFSETS, data, lambda b: b.error_code)
        if body.error_code != ErrorCode.none:
            raise KafkaErrorResponse(body.error_code, f"AlterShareGroupOffsets for group {group!r}",
                                     body.error_message)
        for t in body.responses:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise KafkaErrorResponse(p.error_code, f"AlterShareGroupOffsets for {t.topic_name}-"
                                                           f"{p.partition_index}", p.error_message)

    def delete_share_group_offsets(self, group: str, topics: Sequence[str]) -> dict[str, KafkaErrorResponse | None]:
        """DeleteShareGroupOffsets: the group's state for whole topics; each topic's failure, or
        None where it was deleted. A group-level error is raised."""
        names = list(dict.fromkeys(topics))
        data = {"group_id": group, "topics": [{"topic_name": t} for t in names]}
        body, _ = self._share_call(group, DELETE_SHARE_GROUP_OFFSETS, data, lambda b: b.error_code)
        if body.error_code != ErrorCode.none:
            raise KafkaErrorResponse(body.error_code, f"DeleteShareGroupOffsets for group {group!r}",
                                     body.error_message)
        out: dict[str, KafkaErrorResponse | None] = {t: None for t in names}
        for r in body.responses:
            if r.error_code != ErrorCode.none:
                out[r.topic_name] = KafkaErrorResponse(r.error_code, f"topic {r.topic_name!r}", r.error_message)
        return out


def _only_group(entries: Any, group: str, api: str) -> Any:
    entries = list(entries)
    found = [g for g in entries if g.group_id == group]
    if len(found) != 1:
        raise AdminError(f"{api} answered {len(entries)} groups, none for {group!r}")
    return found[0]


def _assignment(value: Any) -> TopicAssignment:
    """A described assignment by topic name (the id where the name is missing), sorted; the same
    reading as consumer_groups.described_assignment, which imports this client."""
    out: dict[str, set[int]] = {}
    for tp in value.topic_partitions if value is not None else ():
        name = tp.topic_name or kafka_uuid(tp.topic_id) or "?"
        out.setdefault(name, set()).update(int(p) for p in tp.partitions)
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(out.items()) if ps)
