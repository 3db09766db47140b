"""The one dispatch table, API key → handler and the versions served, and the request pipeline.

Three tiers of errors, as in Kafka: an undecodable frame, an unknown API key or an unsupported
version closes the connection (except ApiVersions, which always answers); per-partition problems
are data inside the response; a handler that raises a KafkaError gets that code in the response's
top-level error field, anything unexpected UNKNOWN_SERVER_ERROR, and the broker keeps serving.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from time import perf_counter, perf_counter_ns, time
from typing import Any, Awaitable, Callable

from kbroker.api import (
    acls,
    alter_replica_log_dirs,
    api_versions,
    cluster,
    configs,
    consumer_groups,
    delete_records,
    describe_cluster,
    describe_log_dirs,
    describe_producers,
    elect_leaders,
    fetch,
    find_coordinator,
    groups,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    offsets,
    produce,
    reassignments,
    client_quotas,
    sasl,
    scram_credentials,
    share_fetch,
    share_groups,
    share_offsets,
    share_state,
    throttling,
    topics,
    transaction_listing,
    transactions,
    txn_offset_commit,
)
from kbroker.api.authorization import CLUSTER_NAME, AclOperation, ResourceType, permitted
from kbroker.api.context import Deferred, RequestContext
from kbroker.errors import ErrorCode, error_code_of
from kbroker.wire import consumer_group_heartbeat as consumer_group_heartbeat_codec
from kbroker.wire import share_fetch_response
from kbroker.wire.fetch_response import encode_fetch_response
from kbroker.wire.metadata_response import encode_metadata_response
from kbroker.wire.produce_request import decode_produce_request
from kbroker.wire.produce_response import encode_produce_response
from kbroker.wire.protocol import (
    API_VERSIONS_KEY,
    ProtocolError,
    build_response,
    decode_request,
    encode_response,
    parse_request_header,
    response_class,
)

logger = logging.getLogger(__name__)

PRODUCE_KEY, FETCH_KEY, METADATA_KEY = 0, 1, 3  # encoded by hand on the hot path

Handler = Callable[[RequestContext, Any], Awaitable[dict | None]]


@dataclass(frozen=True)
class ApiSpec:
    name: str
    min_version: int
    max_version: int
    handler: Handler
    cluster_only: bool = False  # inter-broker APIs: served (and advertised) only in a cluster
    sasl_only: bool = False  # served (and advertised) only on SASL listeners
    cluster_operation: AclOperation | None = None  # what the principal must hold on the CLUSTER (Kafka's check)
    group_protocol: str | None = None  # served only when group.coordinator.rebalance.protocols has it


def served(spec: ApiSpec, broker, session) -> bool:
    """Whether this connection is served `spec` (and ApiVersions lists it)."""
    if spec.cluster_only and not broker.cluster:
        return False
    if spec.group_protocol is not None and spec.group_protocol not in broker.group_coordinator.config.rebalance_protocols:
        return False
    return not spec.sasl_only or (session is not None and session.sasl)


# Kafka 3.9's version ranges: the versions Kafka 4 removed (KIP-896) are served too, decoded by
# schema_codec from 3.9's JSON definitions (wire/interbroker.OLD_VERSIONS); Fetch below v4 answers
# with down-converted message sets (wire/down_convert.py).
DISPATCH: dict[int, ApiSpec] = {
    0: ApiSpec("Produce", 0, 11, produce.handle),
    1: ApiSpec("Fetch", 0, 17, fetch.handle),
    2: ApiSpec("ListOffsets", 0, 9, list_offsets.handle),
    3: ApiSpec("Metadata", 0, 12, metadata.handle),
    4: ApiSpec("LeaderAndIsr", 7, 7, cluster.leader_and_isr, cluster_only=True, cluster_operation=AclOperation.CLUSTER_ACTION),
    5: ApiSpec("StopReplica", 4, 4, cluster.stop_replica, cluster_only=True, cluster_operation=AclOperation.CLUSTER_ACTION),
    6: ApiSpec("UpdateMetadata", 8, 8, cluster.update_metadata, cluster_only=True, cluster_operation=AclOperation.CLUSTER_ACTION),
    7: ApiSpec("ControlledShutdown", 3, 3, cluster.controlled_shutdown, cluster_only=True, cluster_operation=AclOperation.CLUSTER_ACTION),
    8: ApiSpec("OffsetCommit", 0, 9, offsets.offset_commit),
    9: ApiSpec("OffsetFetch", 0, 9, offsets.offset_fetch),
    10: ApiSpec("FindCoordinator", 0, 6, find_coordinator.handle),
    11: ApiSpec("JoinGroup", 0, 9, groups.join_group),
    12: ApiSpec("Heartbeat", 0, 4, groups.heartbeat),
    13: ApiSpec("LeaveGroup", 0, 5, groups.leave_group),
    14: ApiSpec("SyncGroup", 0, 5, groups.sync_group),
    15: ApiSpec("DescribeGroups", 0, 6, groups.describe_groups),  # v6: GROUP_ID_NOT_FOUND (KIP-1043)
    16: ApiSpec("ListGroups", 0, 5, groups.list_groups),
    17: ApiSpec("SaslHandshake", 0, 1, sasl.sasl_handshake, sasl_only=True),
    18: ApiSpec("ApiVersions", 0, 4, api_versions.handle),
    19: ApiSpec("CreateTopics", 0, 7, topics.create_topics),
    20: ApiSpec("DeleteTopics", 0, 6, topics.delete_topics),
    21: ApiSpec("DeleteRecords", 0, 2, delete_records.handle),
    22: ApiSpec("InitProducerId", 0, 5, transactions.init_producer_id),
    23: ApiSpec("OffsetForLeaderEpoch", 0, 4, offset_for_leader_epoch.handle),
    24: ApiSpec("AddPartitionsToTxn", 0, 5, transactions.add_partitions_to_txn),
    25: ApiSpec("AddOffsetsToTxn", 0, 4, transactions.add_offsets_to_txn),
    26: ApiSpec("EndTxn", 0, 4, transactions.end_txn),
    27: ApiSpec("WriteTxnMarkers", 1, 1, transactions.write_txn_markers),
    28: ApiSpec("TxnOffsetCommit", 0, 4, txn_offset_commit.handle),
    29: ApiSpec("DescribeAcls", 0, 3, acls.describe_acls),  # v0: Kafka 3.9's schema (no pattern type)
    30: ApiSpec("CreateAcls", 0, 3, acls.create_acls),
    31: ApiSpec("DeleteAcls", 0, 3, acls.delete_acls),
    32: ApiSpec("DescribeConfigs", 0, 4, configs.describe_configs),
    33: ApiSpec("AlterConfigs", 0, 2, configs.alter_configs),
    34: ApiSpec("AlterReplicaLogDirs", 0, 2, alter_replica_log_dirs.handle),
    35: ApiSpec("DescribeLogDirs", 0, 4, describe_log_dirs.handle),
    36: ApiSpec("SaslAuthenticate", 0, 2, sasl.sasl_authenticate, sasl_only=True),
    37: ApiSpec("CreatePartitions", 0, 3, topics.create_partitions),
    42: ApiSpec("DeleteGroups", 0, 2, groups.delete_groups),
    43: ApiSpec("ElectLeaders", 0, 2, elect_leaders.handle, cluster_operation=AclOperation.ALTER),
    44: ApiSpec("IncrementalAlterConfigs", 0, 1, configs.incremental_alter_configs),
    45: ApiSpec("AlterPartitionReassignments", 0, 0, reassignments.alter_partition_reassignments, cluster_operation=AclOperation.ALTER),
    46: ApiSpec("ListPartitionReassignments", 0, 0, reassignments.list_partition_reassignments, cluster_operation=AclOperation.DESCRIBE),
    47: ApiSpec("OffsetDelete", 0, 0, offsets.offset_delete),
    48: ApiSpec("DescribeClientQuotas", 0, 1, client_quotas.describe_client_quotas),
    49: ApiSpec("AlterClientQuotas", 0, 1, client_quotas.alter_client_quotas),
    50: ApiSpec("DescribeUserScramCredentials", 0, 0, scram_credentials.describe_user_scram_credentials, cluster_operation=AclOperation.DESCRIBE),
    51: ApiSpec("AlterUserScramCredentials", 0, 0, scram_credentials.alter_user_scram_credentials),
    56: ApiSpec("AlterPartition", 2, 3, cluster.alter_partition, cluster_only=True, cluster_operation=AclOperation.CLUSTER_ACTION),
    60: ApiSpec("DescribeCluster", 0, 1, describe_cluster.handle),
    61: ApiSpec("DescribeProducers", 0, 0, describe_producers.handle),
    65: ApiSpec("DescribeTransactions", 0, 0, transaction_listing.describe_transactions),
    66: ApiSpec("ListTransactions", 0, 1, transaction_listing.list_transactions),
    68: ApiSpec("ConsumerGroupHeartbeat", 0, 1, consumer_groups.consumer_group_heartbeat, group_protocol="consumer"),
    69: ApiSpec("ConsumerGroupDescribe", 0, 1, consumer_groups.consumer_group_describe, group_protocol="consumer"),
    76: ApiSpec("ShareGroupHeartbeat", 1, 1, share_groups.share_group_heartbeat, group_protocol="share"),
    77: ApiSpec("ShareGroupDescribe", 1, 1, share_groups.share_group_describe, group_protocol="share"),
    78: ApiSpec("ShareFetch", 1, 2, share_fetch.share_fetch, group_protocol="share"),
    79: ApiSpec("ShareAcknowledge", 1, 2, share_fetch.share_acknowledge, group_protocol="share"),
    84: ApiSpec("ReadShareGroupState", 0, 0, share_state.read_share_group_state, cluster_only=True,
                cluster_operation=AclOperation.CLUSTER_ACTION, group_protocol="share"),
    85: ApiSpec("WriteShareGroupState", 0, 0, share_state.write_share_group_state, cluster_only=True,
                cluster_operation=AclOperation.CLUSTER_ACTION, group_protocol="share"),
    86: ApiSpec("DeleteShareGroupState", 0, 0, share_state.delete_share_group_state, cluster_only=True,
                cluster_operation=AclOperation.CLUSTER_ACTION, group_protocol="share"),
    90: ApiSpec("DescribeShareGroupOffsets", 0, 1, share_offsets.describe_share_group_offsets, group_protocol="share"),
    91: ApiSpec("AlterShareGroupOffsets", 0, 0, share_offsets.alter_share_group_offsets, group_protocol="share"),
    92: ApiSpec("DeleteShareGroupOffsets", 0, 0, share_offsets.delete_share_group_offsets, group_protocol="share"),
}


async def handle_frame(broker, frame: bytes, client_host: str = "",
                       session=None, throttled=None) -> bytes | list | Deferred | None:
    """Answer one request frame: response bytes, None for no response (acks=0), for Fetch a
    list of chunks (bytes and file ranges the server sends with sendfile), or a Deferred whose
    complete() gives one of those after a wait the connection need not sit through.

    `session` is the connection's (security/session.py): before authentication only ApiVersions and
    the SASL APIs are served. `throttled(ms)` is called when a client quota throttles the request
    (the server mutes the connection that long, KIP-219). Raises ProtocolError when the connection
    must be closed.
    """
    stats = broker.stats
    started = perf_counter() if stats is not None else 0.0
    header, body_offset = parse_request_header(frame)
    spec = DISPATCH.get(header.api_key)
    if spec is None or not served(spec, broker, session):
        raise ProtocolError(f"unknown API key {header.api_key}")
    if session is not None and not session.may_send(header.api_key, int(time() * 1000)):
        raise ProtocolError(f"{spec.name} before authentication completed" if not session.authenticated
                            else f"{spec.name} after the SASL session expired (connections.max.reauth.ms)")
    if not spec.min_version <= header.api_version <= spec.max_version:
        if header.api_key == API_VERSIONS_KEY:
            return api_versions.unsupported_version_response(header.correlation_id, spec.min_version, spec.max_version)
        raise ProtocolError(f"{spec.name} v{header.api_version} is not supported")
    quotas = broker.client_quotas.active and header.api_key not in throttling.EXEMPT  # some quota is configured
    decode_started = perf_counter_ns() if quotas else 0
    if header.api_key == PRODUCE_KEY:
        request = decode_produce_request(header.api_version, frame, body_offset)
    elif header.api_key == consumer_group_heartbeat_codec.API_KEY:
        request = consumer_group_heartbeat_codec.decode_request(header.api_version, frame, body_offset)
    else:
        request = decode_request(header, frame, body_offset)
    ctx = RequestContext(header, broker, client_host, session)
    if spec.cluster_operation is not None and not permitted(ctx, spec.cluster_operation, ResourceType.CLUSTER,
                                                            CLUSTER_NAME):
        return _encode(header, _error_response(header, ErrorCode.cluster_authorization_failed))
    if quotas and not throttling.is_follower_fetch(header, request):  # followers are never client-throttled
        def done() -> None:
            if stats is not None:
                stats.record_request(spec.name, header.api_version, perf_counter() - started)
        return await throttling.answer_with_quotas(spec, header, ctx, request, len(frame),
                                                   perf_counter_ns() - decode_started, throttled, _answer, _encode,
                                                   done)
    data = await _answer(spec, header, spec.handler(ctx, request))
    if isinstance(data, Deferred):
        async def complete() -> bytes | list | None:
            response = _encode(header, await _answer(spec, header, data.complete()))
            if stats is not None:
                stats.record_request(spec.name, header.api_version, perf_counter() - started)
            return response
        return Deferred(complete)
    response = _encode(header, data)
    if stats is not None:
        stats.record_request(spec.name, header.api_version, perf_counter() - started)
    return response


async def _answer(spec: "ApiSpec", header, pending: Awaitable[Any]) -> Any:
    try:
        return await pending
    except Exception as exc:  # tier 3: the whole request failed
        code = error_code_of(exc)
        if code == ErrorCode.unknown_server_error:
            logger.exception("unexpected error handling %s v%d", spec.name, header.api_version)
        return _error_response(header, code)


def _encode(header, data: Any) -> bytes | list | None:
    if data is None:
        return None
    if header.api_key == FETCH_KEY:
        return encode_fetch_response(header.api_version, header.correlation_id, data)
    if header.api_key == share_fetch_response.API_KEY:
        return share_fetch_response.encode_response(header.api_version, header.correlation_id, data)
    if header.api_key == METADATA_KEY:
        return encode_metadata_response(header.api_version, header.correlation_id, data)
    if header.api_key == PRODUCE_KEY:
        return encode_produce_response(header.api_version, header.correlation_id, data)
    if header.api_key == consumer_group_heartbeat_codec.API_KEY:
        return consumer_group_heartbeat_codec.encode_response(header.api_version, header.correlation_id, data)
    return encode_response(header, build_response(header, data))


def _error_response(header, code: ErrorCode) -> dict:
    cls = response_class(header.api_key, header.api_version)
    if "error_code" not in getattr(cls, "__dataclass_fields__", {}):
        raise ProtocolError(f"request failed with {code.name} and its response has no error field")
    return {"error_code": code}
