"""DescribeCluster: cluster id, controller and the brokers of the listener the client came in on.

A broker answers for brokers only: v1's endpoint type 2 (the controllers, asked by an Admin with
`bootstrap.controllers`, KIP-919) is MISMATCHED_ENDPOINT_TYPE and any other type
UNSUPPORTED_ENDPOINT_TYPE, as Kafka's AuthHelper.computeDescribeClusterResponse answers."""

from __future__ import annotations

from kbroker.api.authorization import NOT_REQUESTED, ResourceType, authorized_operations
from kbroker.api.context import RequestContext, listener_addresses
from kbroker.errors import ErrorCode

BROKERS, CONTROLLERS = 1, 2  # Kafka's EndpointType ids
ENDPOINT_TYPES = {BROKERS: "BROKER", CONTROLLERS: "CONTROLLER"}


def _refused(code: ErrorCode, message: str) -> dict:
    """Kafka's answer to an endpoint type it does not serve: the error, every other field its default."""
    return {"throttle_time": 0, "error_code": code, "error_message": message, "endpoint_type": BROKERS,
            "cluster_id": "", "controller_id": -1, "brokers": [], "cluster_authorized_operations": NOT_REQUESTED}


async def handle(ctx: RequestContext, request) -> dict:
    requested = getattr(request, "endpoint_type", BROKERS)  # v1+
    if requested not in ENDPOINT_TYPES:
        return _refused(ErrorCode.unsupported_endpoint_type, f"Unsupported endpoint type {requested}")
    if requested != BROKERS:
        return _refused(ErrorCode.mismatched_endpoint_type, "The request was sent to an endpoint of type BROKER, "
                                                            f"but we wanted an endpoint of type {ENDPOINT_TYPES[requested]}")
    metadata = ctx.broker.metadata
    operations = NOT_REQUESTED
    if request.include_cluster_authorized_operations:
        operations = authorized_operations(ResourceType.CLUSTER, "kafka-cluster", ctx)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": BROKERS,
        "cluster_id": metadata.cluster_id,
        "controller_id": metadata.controller_id,
        "brokers": [
            {"broker_id": b.node_id, "host": host, "port": port, "rack": b.rack}
            for b, host, port in listener_addresses(ctx, metadata.brokers())
        ],
        "cluster_authorized_operations": operations,
    }
