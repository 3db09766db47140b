"""InitProducerId: producer ids for idempotent producers (transactional ids come with transactions)."""

from __future__ import annotations

from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode


async def handle(ctx: RequestContext, request) -> dict:
    if request.transactional_id is not None:
        # Transactions are not served yet; a non-retriable error keeps clients from spinning.
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_request, "producer_id": -1, "producer_epoch": -1}
    # Like Kafka, an idempotent producer (even one bumping its epoch, KIP-360) gets a fresh id, epoch 0.
    producer_id = await ctx.broker.producer_ids.next_id()
    return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": producer_id, "producer_epoch": 0}
