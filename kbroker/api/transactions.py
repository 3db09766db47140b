"""The transactional producer's APIs: InitProducerId, AddPartitionsToTxn (v4+: several
transactions, or verify-only from other brokers), AddOffsetsToTxn, EndTxn; and WriteTxnMarkers,
which coordinators (and `kbroker transactions abort`) send to partition leaders.

The request fields are mapped onto the transaction coordinator (kbroker/txn/coordinator.py);
PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for versions too old to know it, as Kafka does.
"""

from __future__ import annotations

from kbroker.api.access import (
    Op,
    Res,
    allowed_topics,
    cluster_allowed,
    require_cluster,
    require_group,
    require_transactional_id,
)
from kbroker.api.authorization import CLUSTER_NAME, audit_denied, permitted, permitted_any
from kbroker.api.context import RequestContext
from kbroker.errors import ClusterAuthorizationError, ErrorCode
from kbroker.replica.txn_markers import MarkerWrite
from kbroker.txn.coordinator_rules import error_for_version
from kbroker.wire.protocol import to_ms

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26


def _for_version(ctx: RequestContext, api_key: int, error: ErrorCode) -> ErrorCode:
    return error_for_version(api_key, ctx.version, error)


async def init_producer_id(ctx: RequestContext, request) -> dict:
    broker = ctx.broker
    transactional_id = request.transactional_id
    if transactional_id is not None:
        require_transactional_id(ctx, Op.WRITE, transactional_id)
    elif not (cluster_allowed(ctx, Op.IDEMPOTENT_WRITE, log_denied=False) or permitted_any(ctx, Op.WRITE, Res.TOPIC)):
        audit_denied(ctx, Op.IDEMPOTENT_WRITE, Res.CLUSTER, CLUSTER_NAME)
        raise ClusterAuthorizationError("Cluster authorization failed: IDEMPOTENT_WRITE, or WRITE on some topic")
    if transactional_id is None:
        # an idempotent producer (even one bumping its epoch, KIP-360) gets a fresh id, epoch 0, as Kafka
        producer_id = await broker.producer_ids.next_id()
        return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": producer_id, "producer_epoch": 0}
    expected = None
    if ctx.version >= 3:
        expected = (request.producer_id, request.producer_epoch)
    error, producer_id, producer_epoch = await broker.txn_coordinator.init_producer_id(
        transactional_id, to_ms(request.transaction_timeout), expected)
    return {"throttle_time": 0, "error_code": _for_version(ctx, INIT_PRODUCER_ID, error),
            "producer_id": producer_id, "producer_epoch": producer_epoch}


def _unknown_partitions(ctx: RequestContext, topics) -> set[tuple[str, int]]:
    metadata = ctx.broker.metadata
    unknown = set()
    for topic in topics:
        info = metadata.topic(topic.name)
        for p in topic.partitions:
            if info is None or not (0 <= p < info.num_partitions or metadata.is_retired(topic.name, p)):
                unknown.add((topic.name, p))
    return unknown


def _topic_results(topics, codes: dict[tuple[str, int], ErrorCode]) -> list[dict]:
    return [{"name": t.name, "results_by_partition": [
        {"partition_index": p, "partition_error_code": codes[(t.name, p)]} for p in t.partitions]}
        for t in topics]


async def _add_partitions(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
                          topics, verify_only: bool) -> dict[tuple[str, int], ErrorCode]:
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    coordinator = ctx.broker.txn_coordinator
    if not permitted(ctx, Op.WRITE, Res.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
    writable = allowed_topics(ctx, Op.WRITE, {t.name for t in topics})
    if len(writable) < len({t.name for t in topics}):  # Kafka adds none of them then
        return {tp: ErrorCode.operation_not_attempted if tp[0] in writable else ErrorCode.topic_authorization_failed
                for tp in wanted}
    if verify_only:
        return coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, wanted)
    unknown = _unknown_partitions(ctx, topics)
    if unknown:  # Kafka adds none of them then
        return {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                for tp in wanted}
    error = await coordinator.add_partitions(transactional_id, producer_id, producer_epoch, wanted)
    return dict.fromkeys(wanted, _for_version(ctx, ADD_PARTITIONS_TO_TXN, error))


async def add_partitions_to_txn(ctx: RequestContext, request) -> dict:
    if ctx.version < 4:
        topics = request.v3_and_below_topics
        codes = await _add_partitions(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                      request.v3_and_below_producer_epoch, topics, verify_only=False)
        return {"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(topics, codes)}
    require_cluster(ctx, Op.CLUSTER_ACTION)  # v4+ is the brokers' own (verification) form
    results = []
    for txn in request.transactions:
        codes = await _add_partitions(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                                      verify_only=txn.verify_only)
        results.append({"transactional_id": txn.transactional_id, "topic_results": _topic_results(txn.topics, codes)})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results_by_transaction": results}


async def add_offsets_to_txn(ctx: RequestContext, request) -> dict:
    require_transactional_id(ctx, Op.WRITE, request.transactional_id)
    require_group(ctx, Op.READ, request.group_id)
    error = await ctx.broker.txn_coordinator.add_offsets(request.transactional_id, request.producer_id,
                                                         request.producer_epoch, request.group_id)
    return {"throttle_time": 0, "error_code": _for_version(ctx, ADD_OFFSETS_TO_TXN, error)}


async def end_txn(ctx: RequestContext, request) -> dict:
    require_transactional_id(ctx, Op.WRITE, request.transactional_id)
    error = await ctx.broker.txn_coordinator.end_txn(request.transactional_id, request.producer_id,
                                                     request.producer_epoch, request.committed)
    return {"throttle_time": 0, "error_code": _for_version(ctx, END_TXN, error)}


async def write_txn_markers(ctx: RequestContext, request) -> dict:
    if not cluster_allowed(ctx, Op.CLUSTER_ACTION):  # a coordinator's request: brokers only
        return {"markers": [{"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p, "error_code": ErrorCode.cluster_authorization_failed}
                                            for p in t.partition_indexes]} for t in m.topics]}
            for m in request.markers]}
    writes = [MarkerWrite(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result,
                          tuple((t.name, p) for t in m.topics for p in t.partition_indexes))
              for m in request.markers]
    results = await ctx.broker.write_txn_markers(writes)
    return {"markers": [{"producer_id": m.producer_id, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p, "error_code": codes[(t.name, p)]}
                                        for p in t.partition_indexes]}
        for t in m.topics]} for m, codes in zip(request.markers, results)]}
