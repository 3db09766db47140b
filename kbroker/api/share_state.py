"""The share coordinator's inter-broker APIs (KIP-932): ReadShareGroupState (84), WriteShareGroupState
(85) and DeleteShareGroupState (86), v0 — what a share-partition's leader sends to the leader of the
`__share_group_state` partition that keeps its state (share/persister.py, the coordinator side).
Served in a cluster with share groups on, to principals holding CLUSTER_ACTION (the brokers);
NOT_COORDINATOR where the state partition is not led here, FENCED_LEADER_EPOCH /
FENCED_STATE_EPOCH as Kafka's share coordinator answers them; a malformed snapshot is
INVALID_REQUEST.
"""

from __future__ import annotations

from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode
from kbroker.share.partition import SharePartition
from kbroker.share.partition_types import PersisterStateBatch, ShareSnapshot
from kbroker.share.state_records import ShareStateKey, ShareStateValue

E = ErrorCode


async def _answers(request, answer) -> list[dict]:
    """The response's results: `await answer(key, partition data)` for every partition named."""
    results = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            key = ShareStateKey(request.group_id, topic.topic_id, p.partition) if topic.topic_id else None
            parts.append(await answer(key, p))
        results.append({"topic_id": topic.topic_id, "partitions": parts})
    return results


async def read_share_group_state(ctx: RequestContext, request) -> dict:
    persister = ctx.broker.share_manager.persister

    async def one(key, p) -> dict:
        entry = {"partition": p.partition, "error_code": E.none, "error_message": None, "state_epoch": -1,
                 "start_offset": -1, "state_batches": []}
        if key is None:
            entry["error_code"] = E.invalid_request
            return entry
        code, stored = await persister.read_local(key, p.leader_epoch)
        entry["error_code"] = code
        if code == E.none and stored is not None:
            entry["state_epoch"] = stored.state_epoch
            entry["start_offset"] = stored.snapshot.start_offset
            entry["state_batches"] = [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                       "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                                      for b in stored.snapshot.state_batches]
        return entry

    return {"results": await _answers(request, one)}


def _snapshot(p) -> ShareSnapshot | None:
    snapshot = ShareSnapshot(p.start_offset, tuple(
        PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches))
    try:
        SharePartition.restore(snapshot)  # what a leader could not carry on from is refused here
    except ValueError:
        return None
    return snapshot


async def write_share_group_state(ctx: RequestContext, request) -> dict:
    persister = ctx.broker.share_manager.persister

    async def one(key, p) -> dict:
        snapshot = _snapshot(p)
        if key is None or snapshot is None:
            code = E.invalid_request
        else:
            code = await persister.write_local(key, ShareStateValue(snapshot, p.state_epoch, p.leader_epoch))
        return {"partition": p.partition, "error_code": code, "error_message": None}

    return {"results": await _answers(request, one)}


async def delete_share_group_state(ctx: RequestContext, request) -> dict:
    persister = ctx.broker.share_manager.persister

    async def one(key, p) -> dict:
        code = E.invalid_request if key is None else await persister.delete_local(key)
        return {"partition": p.partition, "error_code": code, "error_message": None}

    return {"results": await _answers(request, one)}
