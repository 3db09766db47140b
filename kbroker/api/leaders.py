"""KIP-951: a NOT_LEADER_OR_FOLLOWER (or, for Fetch, FENCED_LEADER_EPOCH) answer names the
partition's current leader and the response carries that leader's endpoint, so a client goes
straight to the new leader instead of waiting for a Metadata refresh (Produce v10+, Fetch v12+
for the leader and v16+ for the endpoints)."""

from __future__ import annotations

from typing import Iterable

from kbroker.api.context import RequestContext, listener_addresses
from kbroker.errors import ErrorCode
from kbroker.log.topic_partition import TopicPartition

_REDIRECTED = {ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch}


def current_leader(ctx: RequestContext, topic: str, index: int) -> tuple[int, int]:
    """(leader id, leader epoch) as this broker knows them best (the newer of what LeaderAndIsr
    told its replica and what the metadata cache holds); (-1, -1) when unknown."""
    view = ctx.broker.views.view(topic)  # a view's leaders are its source's
    topic = view.source if view is not None else topic
    best = (-1, -1)
    replica = ctx.broker.replica_manager.partitions.get(TopicPartition(topic, index))
    if replica is not None and replica.leader_epoch >= 0:
        best = (replica.leader_id, replica.leader_epoch)
    cached = ctx.broker.metadata.partition_state(topic, index)
    if cached is not None and cached.leader_epoch > best[1]:
        best = (cached.leader, cached.leader_epoch)
    return best


def add_current_leaders(ctx: RequestContext, data: dict, entries: Iterable[tuple[str, int, dict]],
                        errors=frozenset({ErrorCode.not_leader_or_follower})) -> None:
    """Name the current leader in each (topic, partition, response entry) answered with one of
    `errors`, and put the leaders' endpoints in `data["node_endpoints"]`."""
    leaders = set()
    for topic, index, entry in entries:
        if entry["error_code"] not in errors:
            continue
        leader, epoch = current_leader(ctx, topic, index)
        if leader >= 0:
            entry["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
            leaders.add(leader)
    metadata = ctx.broker.metadata
    endpoints = [b for b in (metadata.broker(b) for b in sorted(leaders)) if b is not None]
    data["node_endpoints"] = [{"node_id": b.node_id, "host": host, "port": port, "rack": b.rack}
                              for b, host, port in listener_addresses(ctx, endpoints)]


def add_fetch_leaders(ctx: RequestContext, data: dict) -> None:
    add_current_leaders(ctx, data, ((t["topic"], p["partition_index"], p) for t in data["responses"]
                                    for p in t["partitions"]), _REDIRECTED)
