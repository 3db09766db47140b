"""FindCoordinator: which broker coordinates a group (key type 0) or a transactional id (1).

A group's coordinator is the leader of `__consumer_offsets` partition
`abs(hash(group)) % offsets.topic.num.partitions` (Java's String.hashCode, as Kafka); a
transactional id's, the leader of `__transaction_state` partition
`abs(hash(id)) % transaction.state.log.num.partitions`. Each topic is created on first use.
"""

from __future__ import annotations

from kbroker.api.access import Op, Res
from kbroker.api.authorization import permitted
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.group.offsets_log import OFFSETS_TOPIC
from kbroker.txn.log_format import TRANSACTION_STATE_TOPIC

GROUP, TRANSACTION = 0, 1


async def _coordinator(ctx: RequestContext, key: str, key_type: int) -> dict:
    if key_type not in (GROUP, TRANSACTION):
        return {"key": key, "error_code": ErrorCode.invalid_request, "error_message": f"Unknown key type {key_type}",
                "node_id": -1, "host": "", "port": -1}
    broker = ctx.broker
    if not permitted(ctx, Op.DESCRIBE, Res.GROUP if key_type == GROUP else Res.TRANSACTIONAL_ID, key):
        code = ErrorCode.group_authorization_failed if key_type == GROUP else \
            ErrorCode.transactional_id_authorization_failed
        return {"key": key, "error_code": code, "error_message": None, "node_id": -1, "host": "", "port": -1}
    try:
        if key_type == GROUP:
            await broker.ensure_offsets_topic()
            topic, partition = OFFSETS_TOPIC, broker.group_coordinator.partition_for(key)
        else:
            await broker.ensure_transaction_state_topic()
            topic, partition = TRANSACTION_STATE_TOPIC, broker.txn_coordinator.partition_for(key)
    except KafkaError as exc:
        return {"key": key, "error_code": error_code_of(exc), "error_message": str(exc),
                "node_id": -1, "host": "", "port": -1}
    info = broker.metadata.topic(topic)
    if broker.cluster:  # the coordinator is wherever that partition's leader is now
        state = broker.metadata.partition_state(topic, partition)
        leader_id = state.leader if state is not None else -1
    else:
        leader_id = info.assignment[partition][0] if info is not None else -1
    me = next((b for b in broker.metadata.brokers() if b.node_id == leader_id), None)
    address = me.address_for(ctx.listener) if me is not None else None
    if me is None or address is None:
        return {"key": key, "error_code": ErrorCode.coordinator_not_available,
                "error_message": "The coordinator is not available.", "node_id": -1, "host": "", "port": -1}
    return {"key": key, "error_code": ErrorCode.none, "error_message": None,
            "node_id": me.node_id, "host": address[0], "port": address[1]}


async def handle(ctx: RequestContext, request) -> dict:
    key_type = getattr(request, "key_type", GROUP)
    if ctx.version >= 4:
        return {"throttle_time": 0,
                "coordinators": [await _coordinator(ctx, key, key_type) for key in request.coordinator_keys]}
    answer = await _coordinator(ctx, request.key, key_type)
    del answer["key"]
    return {"throttle_time": 0, **answer}
