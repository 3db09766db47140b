"""Committed offsets: OffsetCommit, OffsetFetch (v8+ several groups at once), OffsetDelete.

Offsets are stored by the group coordinator in `__consumer_offsets`; this module maps request
fields onto it and checks that each partition exists, as Kafka's request handler does. OffsetFetch
v7+ may `require_stable`: a partition with a transaction's offsets pending then answers
UNSTABLE_OFFSET_COMMIT (a read_committed consumer retries); without it they are not seen.

The versions Kafka 4 removed and 3.9 serves: OffsetCommit v1 may carry each partition's commit
timestamp; OffsetCommit v0 and OffsetFetch v0 (Kafka 0.8.1's, kept in ZooKeeper by a Kafka 3.9
broker in ZooKeeper mode, refused in KRaft mode) are kept with the group coordinator here, as a
commit of no generation — so such a client's offsets survive, and newer versions and the group
tools see them.
"""

from __future__ import annotations

import time

from kbroker.api.access import Op, Res, allowed_topics
from kbroker.api.authorization import permitted
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode, KafkaError
from kbroker.group.metadata import OffsetAndMetadata
from kbroker.group.offsets_log import OFFSETS_TOPIC
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.protocol import to_ms

INVALID_OFFSET = -1


def partition_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    """A partition of the topic, or one a decrease retired (its consumers may still commit there)."""
    view = ctx.broker.views.view(topic)  # a view's partitions are its source's
    topic = view.source if view is not None else topic
    info = ctx.broker.metadata.topic(topic)
    return info is not None and (0 <= partition < info.num_partitions or ctx.broker.metadata.is_retired(topic, partition))


def requested_offsets(ctx: RequestContext, topics, now: int, expire: int = -1
                      ) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], OffsetAndMetadata]]:
    """(errors, offsets) of an OffsetCommit's or TxnOffsetCommit's partitions: a topic the principal
    may not READ is TOPIC_AUTHORIZATION_FAILED, a partition that does not exist
    UNKNOWN_TOPIC_OR_PARTITION, the others' offsets are to be committed."""
    errors: dict[tuple[str, int], ErrorCode] = {}
    wanted: dict[tuple[str, int], OffsetAndMetadata] = {}
    readable = allowed_topics(ctx, Op.READ, {t.name for t in topics})
    for topic in topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = ErrorCode.topic_authorization_failed
                continue
            if not partition_exists(ctx, topic.name, p.partition_index):
                errors[tp] = ErrorCode.unknown_topic_or_partition
                continue
            committed_at = getattr(p, "commit_timestamp", -1)  # OffsetCommit v1: the client's, -1 for now
            wanted[tp] = OffsetAndMetadata(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                           p.committed_metadata or "", committed_at if committed_at != -1 else now,
                                           expire)
    return errors, wanted


async def offset_commit(ctx: RequestContext, request) -> dict:
    if not permitted(ctx, Op.READ, Res.GROUP, request.group_id):  # Kafka: every partition gets the error
        return {"throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                             "error_code": ErrorCode.group_authorization_failed}
                                            for p in t.partitions]} for t in request.topics]}
    coordinator = (await ctx.broker.group_coordinator_for_request())
    now = time.time_ns() // 1_000_000
    retention = to_ms(getattr(request, "retention_time", None))  # v2-v4 only; kio decodes it as a timedelta
    expire = now + retention if retention >= 0 else -1
    errors, wanted = requested_offsets(ctx, request.topics, now, expire)
    if wanted:
        errors.update(coordinator.commit_offsets(request.group_id, getattr(request, "member_id", ""),  # v1+
                                                 getattr(request, "group_instance_id", None),
                                                 getattr(request, "generation_id_or_member_epoch", -1), wanted,
                                                 api_version=ctx.version))
        if ctx.broker.cluster and any(code == ErrorCode.none for code in errors.values()):
            await wait_for_commit_replication(ctx, coordinator, request.group_id, errors)
    return {"throttle_time": 0, "topics": [
        {"name": topic.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": errors[(topic.name, p.partition_index)]}
            for p in topic.partitions]}
        for topic in request.topics]}


async def wait_for_commit_replication(ctx: RequestContext, coordinator, group_id: str,
                                errors: dict[tuple[str, int], ErrorCode]) -> None:
    """A commit is acknowledged once the offsets partition's ISR has it (acks=all, as Kafka)."""
    rm = ctx.broker.replica_manager
    try:
        partition = rm.get_leader_partition(TopicPartition(OFFSETS_TOPIC, coordinator.partition_for(group_id)))
    except KafkaError:
        code = ErrorCode.not_coordinator
    else:
        code = await rm.wait_for_replication(partition, partition.log_end_offset,
                                             ctx.broker.config.get("offsets.commit.timeout.ms") / 1000)
        if code in (ErrorCode.not_leader_or_follower,):
            code = ErrorCode.not_coordinator
        elif code != ErrorCode.none:
            code = ErrorCode.coordinator_not_available if code != ErrorCode.request_timed_out else code
    if code != ErrorCode.none:
        for tp, current in errors.items():
            if current == ErrorCode.none:
                errors[tp] = code


async def _fetch_group(ctx: RequestContext, group_id: str, topics, require_stable: bool,
                       member_id: str | None = None, member_epoch: int = -1) -> tuple[ErrorCode, list[dict]]:
    if not permitted(ctx, Op.DESCRIBE, Res.GROUP, group_id):
        return ErrorCode.group_authorization_failed, []
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    coordinator = await ctx.broker.group_coordinator_for_request()
    error, found = coordinator.fetch_offsets(group_id, wanted, member_id, member_epoch)
    if error != ErrorCode.none:
        return error, []
    # topics the principal may not DESCRIBE: named ones answer TOPIC_AUTHORIZATION_FAILED, and a
    # fetch of every committed offset leaves them out (a view's reader never sees its source's)
    described = allowed_topics(ctx, Op.DESCRIBE, {t for t, _ in found} | {t.name for t in topics or ()},
                               log_denied=topics is not None)
    denied = {tp for tp in found if tp[0] not in described}
    for tp in denied:
        del found[tp]
    if topics is not None:
        denied = {(t.name, p) for t in topics for p in t.partition_indexes if t.name not in described}
    unstable = coordinator.unstable_offsets(group_id, found) if require_stable else set()
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), om in sorted(found.items()):
        if (topic, partition) in unstable:
            om = None
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": om.offset if om else INVALID_OFFSET,
            "committed_leader_epoch": om.leader_epoch if om else -1,
            "metadata": om.metadata if om else "",
            "error_code": ErrorCode.unstable_offset_commit if (topic, partition) in unstable else ErrorCode.none,
        })
    if topics is not None:
        for topic, partition in sorted(denied):
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": INVALID_OFFSET, "committed_leader_epoch": -1,
                "metadata": "", "error_code": ErrorCode.topic_authorization_failed})
    if topics is not None:  # answer in the order asked
        order = {t.name: i for i, t in enumerate(topics)}
        return ErrorCode.none, [{"name": name, "partitions": by_topic[name]}
                                for name in sorted(by_topic, key=order.__getitem__)]
    return ErrorCode.none, [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


async def offset_fetch(ctx: RequestContext, request) -> dict:
    require_stable = bool(getattr(request, "require_stable", False))  # v7+
    if ctx.version >= 8:
        groups = []
        for group in request.groups:
            # v9+: a consumer-protocol member fetches at its member epoch (STALE_MEMBER_EPOCH otherwise)
            error, topics = await _fetch_group(ctx, group.group_id, group.topics, require_stable,
                                               getattr(group, "member_id", None), getattr(group, "member_epoch", -1))
            groups.append({"group_id": group.group_id, "topics": topics, "error_code": error})
        return {"throttle_time": 0, "groups": groups}
    error, topics = await _fetch_group(ctx, request.group_id, request.topics, require_stable)
    if error != ErrorCode.none and ctx.version < 2 and request.topics:
        # v1 has no group-level error: every partition carries it
        topics = [{"name": t.name, "partitions": [
            {"partition_index": p, "committed_offset": INVALID_OFFSET, "committed_leader_epoch": -1,
             "metadata": "", "error_code": error} for p in t.partition_indexes]} for t in request.topics]
    return {"throttle_time": 0, "topics": topics, "error_code": error}


async def offset_delete(ctx: RequestContext, request) -> dict:
    if not permitted(ctx, Op.DELETE, Res.GROUP, request.group_id):
        return {"error_code": ErrorCode.group_authorization_failed, "throttle_time": 0, "topics": []}
    readable = allowed_topics(ctx, Op.READ, {t.name for t in request.topics})
    partitions = [(t.name, p.partition_index) for t in request.topics for p in t.partitions if t.name in readable]
    error, results = (await ctx.broker.group_coordinator_for_request()).delete_offsets(request.group_id, partitions)
    topics = []
    if error == ErrorCode.none:
        for t in request.topics:
            topics.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": ErrorCode.topic_authorization_failed if t.name not in readable else
                 results.get((t.name, p.partition_index), ErrorCode.unknown_topic_or_partition)
                 if partition_exists(ctx, t.name, p.partition_index) else ErrorCode.unknown_topic_or_partition}
                for p in t.partitions]})
    return {"error_code": error, "throttle_time": 0, "topics": topics}
