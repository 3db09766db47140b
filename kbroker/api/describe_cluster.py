"""DescribeCluster: cluster id, controller and the brokers of the listener the client came in on."""

from __future__ import annotations

from kbroker.api.authorization import NOT_REQUESTED, ResourceType, authorized_operations
from kbroker.api.context import RequestContext, listener_addresses
from kbroker.errors import ErrorCode


async def handle(ctx: RequestContext, request) -> dict:
    metadata = ctx.broker.metadata
    operations = NOT_REQUESTED
    if request.include_cluster_authorized_operations:
        operations = authorized_operations(ResourceType.CLUSTER, "kafka-cluster", ctx)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": metadata.cluster_id,
        "controller_id": metadata.controller_id,
        "brokers": [
            {"broker_id": b.node_id, "host": host, "port": port, "rack": b.rack}
            for b, host, port in listener_addresses(ctx, metadata.brokers())
        ],
        "cluster_authorized_operations": operations,
    }
