"""What operators see of the transactions this broker coordinates: DescribeTransactions (v0) and
ListTransactions (v0-1), as Kafka's TransactionCoordinator answers them (`kbroker transactions`
and kafka-transactions.sh use these)."""

from __future__ import annotations

from kbroker.api.access import Op, Res
from kbroker.api.authorization import permitted
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode
from kbroker.txn.state import TransactionState

_LISTED_STATES = {s.state_name: s for s in TransactionState
                  if s not in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE)}

async def describe_transactions(ctx: RequestContext, request) -> dict:
    coordinator = ctx.broker.txn_coordinator
    states = []
    for transactional_id in request.transactional_ids:
        error, md = coordinator.describe(transactional_id)
        if not permitted(ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID, transactional_id):
            error, md = ErrorCode.transactional_id_authorization_failed, None
        if md is None:
            states.append({"error_code": error, "transactional_id": transactional_id, "transaction_state": "",
                           "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                           "producer_id": -1, "producer_epoch": -1, "topics": []})
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in md.partitions:
            by_topic.setdefault(topic, []).append(partition)
        states.append({
            "error_code": ErrorCode.none, "transactional_id": transactional_id,
            "transaction_state": md.state.state_name, "transaction_timeout_ms": md.txn_timeout_ms,
            "transaction_start_time_ms": md.txn_start_timestamp,
            "producer_id": md.producer_id, "producer_epoch": md.producer_epoch,
            "topics": [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())],
        })
    # encoded from Kafka's JSON schema (wire/interbroker.py says why), hence Kafka's field names
    return {"throttle_time_ms": 0, "transaction_states": states}


async def list_transactions(ctx: RequestContext, request) -> dict:
    coordinator = ctx.broker.txn_coordinator
    if coordinator.loading:
        return {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress,
                "unknown_state_filters": [], "transaction_states": []}
    state_filters = set(request.state_filters)
    unknown = sorted(state_filters - set(_LISTED_STATES))
    wanted_states = {_LISTED_STATES[s] for s in state_filters if s in _LISTED_STATES}
    producer_ids = set(request.producer_id_filters)
    min_duration = getattr(request, "duration_filter", -1)  # v1+
    now = coordinator.now_ms()
    listed = []
    for md in coordinator.transactions():
        if md.state not in _LISTED_STATES.values():
            continue
        if state_filters and md.state not in wanted_states:
            continue
        if producer_ids and md.producer_id not in producer_ids:
            continue
        # Kafka's test, literally: an id that never began a transaction (start -1) always passes it
        if min_duration >= 0 and now - md.txn_start_timestamp <= min_duration:
            continue
        if not permitted(ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID, md.transactional_id, log_denied=False):
            continue  # Kafka lists only the ids the principal may describe
        listed.append({"transactional_id": md.transactional_id, "producer_id": md.producer_id,
                       "transaction_state": md.state.state_name})
    listed.sort(key=lambda t: t["transactional_id"])
    return {"throttle_time": 0, "error_code": ErrorCode.none, "unknown_state_filters": unknown,
            "transaction_states": listed}
