"""The admin client's group calls, each at the group's coordinator (`routing.py` finds it and
retries while it loads or moves) except ListGroups, asked of every broker: DescribeGroups,
OffsetFetch, OffsetCommit (as Kafka's admin client commits: no member, generation -1) and
DeleteGroups. The share-group APIs (KIP-932) are `share_calls.py`; ConsumerGroupDescribe
(KIP-848) is `consumer_groups.py`. Mixed into `client.AdminClient`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from kbroker.admin.connection import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    AdminError,
    Connection,
    KafkaErrorResponse,
)
from kbroker.admin.routing import COORDINATOR_RETRIABLE, RoutedClient
from kbroker.admin.values import (
    Broker,
    GroupDescription,
    GroupListing,
    Member,
    TopicPartition,
)


class GroupCalls(RoutedClient):
    """Classic and consumer groups: listed, described, their committed offsets, deleted."""

    def list_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        """Every group of every broker (each lists the groups it coordinates). `states` filters on
        the broker from ListGroups v4; before v4 ListGroups has no states, so they are asked with
        DescribeGroups and filtered here."""
        wanted = None if states is None else set(states)
        brokers, _ = self.metadata([])
        out: dict[str, GroupListing] = {}
        for broker in sorted(brokers.values()):
            conn = self.connection(broker.host, broker.port)
            version = conn.version(LIST_GROUPS)
            body = conn.call(LIST_GROUPS, {"states_filter": sorted(wanted or ()), "types_filter": []}, version)
            if body.error_code != ErrorCode.none:
                raise KafkaErrorResponse(body.error_code, f"ListGroups from {conn.address}")
            listed = [GroupListing(g.group_id, getattr(g, "group_state", None), g.protocol_type,
                                   getattr(g, "group_type", None) or "classic") for g in body.groups]
            if version < 4 and listed:
                states_of = {d.group_id: d.state for d in self._describe_at(conn, [g.group_id for g in listed], broker)}
                listed = [g._replace(state=states_of.get(g.group_id)) for g in listed]
                if wanted is not None:
                    listed = [g for g in listed if g.state in wanted]
            for g in listed:
                out[g.group_id] = g
        return [out[k] for k in sorted(out)]

    def _describe_at(self, conn: Connection, groups: list[str], broker: Broker) -> list[GroupDescription]:
        body = conn.call(DESCRIBE_GROUPS, {"groups": groups, "include_authorized_operations": False})
        return [_description(g, broker) for g in body.groups]

    def describe_group(self, group: str) -> GroupDescription:
        """DescribeGroups at the coordinator. A group the coordinator does not know comes back
        Dead (classic coordinator) or GROUP_ID_NOT_FOUND (newer brokers); both are returned as Dead."""
        def error_of(body: Any) -> int:
            return _only_group(body, group).error_code

        body, coordinator = self._group_call(group, DESCRIBE_GROUPS,
                                             {"groups": [group], "include_authorized_operations": False}, error_of)
        entry = _only_group(body, group)
        if entry.error_code == ErrorCode.group_id_not_found:
            return GroupDescription(group, "Dead", "", "", (), coordinator)
        if entry.error_code != ErrorCode.none:
            raise KafkaErrorResponse(entry.error_code, f"DescribeGroups for group {group!r}",
                                     getattr(entry, "error_message", None))
        return _description(entry, coordinator)

    def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every committed offset of the group (OffsetFetch with topics = null)."""
        def error_of(body: Any) -> int:
            if hasattr(body, "groups"):
                return _only_group(body, group).error_code
            return body.error_code

        data = {"group_id": group, "topics": None, "require_stable": False,
                "groups": [{"group_id": group, "topics": None}]}
        body, _ = self._group_call(group, OFFSET_FETCH, data, error_of)
        code = error_of(body)
        if code == ErrorCode.group_id_not_found:
            return {}
        if code != ErrorCode.none:
            raise KafkaErrorResponse(code, f"OffsetFetch for group {group!r}")
        topics = _only_group(body, group).topics if hasattr(body, "groups") else body.topics
        out: dict[TopicPartition, int] = {}
        for t in topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.none and p.committed_offset >= 0:
                    out[(t.name, int(p.partition_index))] = int(p.committed_offset)
                elif p.error_code not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
                    raise KafkaErrorResponse(p.error_code, f"OffsetFetch for {t.name}-{p.partition_index}")
        return out

    def commit_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        """OffsetCommit as Kafka's admin client does: generation -1, no member id (only an empty
        group accepts it)."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""})
        data = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "retention_time": -1, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        def error_of(body: Any) -> int:
            codes = {p.error_code for t in body.topics for p in t.partitions}
            return next((c for c in codes if c in COORDINATOR_RETRIABLE), ErrorCode.none)

        body, _ = self._group_call(group, OFFSET_COMMIT, data, error_of)
        failed = [(t.name, p.partition_index, p.error_code) for t in body.topics for p in t.partitions
                  if p.error_code != ErrorCode.none]
        if failed:
            topic, partition, code = failed[0]
            more = f" (and {len(failed) - 1} more partitions)" if len(failed) > 1 else ""
            raise KafkaErrorResponse(code, f"OffsetCommit for group {group!r}, {topic}-{partition}{more}")

    def delete_group(self, group: str) -> None:
        def error_of(body: Any) -> int:
            results = [r for r in body.results if r.group_id == group]
            if len(results) != 1:
                raise AdminError(f"DeleteGroups answered {len(body.results)} results, none for group {group!r}")
            return results[0].error_code

        body, _ = self._group_call(group, DELETE_GROUPS, {"groups_names": [group]}, error_of)
        code = error_of(body)
        if code != ErrorCode.none:
            raise KafkaErrorResponse(code, f"DeleteGroups for group {group!r}")


def _only_group(body: Any, group: str) -> Any:
    entries = [g for g in body.groups if g.group_id == group]
    if len(entries) != 1:
        raise AdminError(f"the coordinator answered {len(body.groups)} groups, none for {group!r}")
    return entries[0]


def _description(g: Any, coordinator: Broker) -> GroupDescription:
    members = tuple(Member(m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host,
                           bytes(m.member_metadata), bytes(m.member_assignment)) for m in g.members)
    return GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, members, coordinator)
