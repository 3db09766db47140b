"""Consumer-protocol groups (KIP-848) for `kbroker groups describe`: ConsumerGroupDescribe at the
group's coordinator, its answer as plain values, and the pure computations on them (what a member
still has to give up, the rows of the state and members tables).

A group that is not a consumer-protocol group — ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND
("not a consumer group", or a group nobody knows), or the coordinator does not serve the API at all
(Apache Kafka 3.x) — is `None` here, and the caller describes it with DescribeGroups as before.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple, Sequence

from kio.schema.errors import ErrorCode

from kbroker.admin.client import AdminClient, AdminError, Broker, KafkaErrorResponse
from kbroker.admin.connection import CONSUMER_GROUP_DESCRIBE, kafka_uuid

TopicAssignment = tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partitions), by topic name

# ConsumerGroupDescribe answers that mean "describe it as a classic group" (or not at all).
_NOT_A_CONSUMER_GROUP = {ErrorCode.group_id_not_found, ErrorCode.unsupported_version}

STATE_HEADERS = ("GROUP", "TYPE", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                 "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS")
MEMBER_HEADERS = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "RACK", "#PARTITIONS",
                  "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "PENDING-REVOCATION",
                  "SUBSCRIPTION")


class ConsumerMember(NamedTuple):
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rack_id: str | None
    member_epoch: int
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: TopicAssignment  # what the member holds now
    target_assignment: TopicAssignment  # what the group's assignor gave it at the assignment epoch


class ConsumerGroupDescription(NamedTuple):
    group_id: str
    state: str  # Empty, Assigning, Reconciling, Stable (Dead: deleted)
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerMember, ...]
    coordinator: Broker


# -- the request ---------------------------------------------------------------------------------------

def describe_consumer_group(client: AdminClient, group: str) -> ConsumerGroupDescription | None:
    """ConsumerGroupDescribe at the group's coordinator; None when the group is not a
    consumer-protocol group there (or the coordinator does not serve the API): describe it with
    DescribeGroups. Other errors (authorization, ...) are raised."""
    try:
        coordinator = client.find_coordinator(group)
        served = CONSUMER_GROUP_DESCRIBE in client.connection(coordinator.host, coordinator.port).versions
    except AdminError:
        served = True  # no coordinator to ask yet (loading, moving, just died): the call below retries
    if not served:
        return None

    def error_of(body: Any) -> int:
        return _only_group(body, group).error_code

    body, coordinator = client._group_call(group, CONSUMER_GROUP_DESCRIBE,
                                           {"group_ids": [group], "include_authorized_operations": False},
                                           error_of)
    entry = _only_group(body, group)
    if entry.error_code in _NOT_A_CONSUMER_GROUP:
        return None
    if entry.error_code != ErrorCode.none:
        raise KafkaErrorResponse(entry.error_code, f"ConsumerGroupDescribe for group {group!r}", entry.error_message)
    return description_of(entry, coordinator)


def _only_group(body: Any, group: str) -> Any:
    entries = [g for g in body.groups if g.group_id == group]
    if len(entries) != 1:
        raise AdminError(f"ConsumerGroupDescribe answered {len(body.groups)} groups, none for {group!r}")
    return entries[0]


def described_assignment(value: Any) -> TopicAssignment:
    """A described assignment by topic name (the id where the name is missing), sorted."""
    out: dict[str, set[int]] = {}
    for tp in value.topic_partitions if value is not None else ():
        name = tp.topic_name or kafka_uuid(tp.topic_id) or "?"
        out.setdefault(name, set()).update(int(p) for p in tp.partitions)
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(out.items()) if ps)


def description_of(entry: Any, coordinator: Broker) -> ConsumerGroupDescription:
    """One ConsumerGroupDescribe group entry as plain values."""
    members = tuple(sorted(
        (ConsumerMember(m.member_id, m.instance_id, m.client_id, m.client_host, m.rack_id, int(m.member_epoch),
                        tuple(m.subscribed_topic_names), m.subscribed_topic_regex, described_assignment(m.assignment),
                        described_assignment(m.target_assignment)) for m in entry.members),
        key=lambda m: (m.client_id, m.member_id)))
    return ConsumerGroupDescription(entry.group_id, entry.group_state, int(entry.group_epoch),
                                    int(entry.assignment_epoch), entry.assignor_name, members, coordinator)


# -- pure ------------------------------------------------------------------------------------------------

def pending_revocation(current: TopicAssignment, target: TopicAssignment) -> TopicAssignment:
    """What a member still has to give up: the partitions it holds that its target no longer has
    (current minus target), by topic, without empty topics."""
    wanted = {t: set(ps) for t, ps in target}
    out = []
    for topic, parts in current:
        gone = tuple(p for p in parts if p not in wanted.get(topic, ()))
        if gone:
            out.append((topic, gone))
    return tuple(out)


def assignment_text(assignment: TopicAssignment) -> str:
    """`t(0,1),u(3)` as Kafka's tool prints an assignment; empty when there is none."""
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in assignment if ps)


def subscription_text(member: ConsumerMember) -> str:
    """Topic names, comma-separated, and the regular expression between slashes."""
    parts = list(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        parts.append(f"/{member.subscribed_topic_regex}/")
    return ",".join(parts)


def partition_count(assignment: TopicAssignment) -> int:
    return sum(len(ps) for _t, ps in assignment)


def state_row(desc: ConsumerGroupDescription) -> tuple:
    c = desc.coordinator
    return (desc.group_id, "consumer", f"{c.host}:{c.port} ({c.node_id})", desc.assignor, desc.state,
            desc.group_epoch, desc.assignment_epoch, len(desc.members))


def member_rows(desc: ConsumerGroupDescription) -> list[tuple]:
    """The members table, one row per member; absent values as None (shown as "-")."""
    return [(desc.group_id, m.member_id, m.instance_id, m.client_host, m.client_id, m.rack_id,
             partition_count(m.assignment), m.member_epoch, assignment_text(m.assignment) or None,
             desc.assignment_epoch, assignment_text(m.target_assignment) or None,
             assignment_text(pending_revocation(m.assignment, m.target_assignment)) or None,
             subscription_text(m) or None) for m in desc.members]


def assignment_json(assignment: Iterable[tuple[str, Sequence[int]]]) -> list[dict]:
    return [{"topic": t, "partitions": list(ps)} for t, ps in assignment]


def member_json(m: ConsumerMember) -> dict:
    """A member as `--output json` gives it (the classic members' keys, and the consumer protocol's)."""
    return {"consumer_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
            "host": m.client_host, "rack": m.rack_id, "member_epoch": m.member_epoch,
            "subscribed_topics": list(m.subscribed_topic_names), "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignment": assignment_json(m.assignment), "target_assignment": assignment_json(m.target_assignment),
            "pending_revocation": assignment_json(pending_revocation(m.assignment, m.target_assignment)),
            "error": None}
