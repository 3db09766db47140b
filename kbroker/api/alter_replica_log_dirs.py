"""AlterReplicaLogDirs: move replicas of this broker to other log dirs of this broker (KIP-113).

Per partition, Kafka's answers (rules in ReplicaManager.alter_replica_log_dir): NONE once the move
is started (or already there), LOG_DIR_NOT_FOUND for a path that is not one of `log.dirs` (given
as the absolute path DescribeLogDirs shows), KAFKA_STORAGE_ERROR for an offline dir or partition,
REPLICA_NOT_AVAILABLE for a partition this broker does not host yet (it will be created in that
dir), INVALID_TOPIC_EXCEPTION for a topic name too long for a future log's dir name. The copy runs
in the background (replica/log_dir_mover.py); DescribeLogDirs shows its progress as the future
log's offset lag. A partition named twice gets the last dir named, as Kafka's map does.
"""

from __future__ import annotations

from kbroker.api.access import Op, cluster_allowed
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode
from kbroker.log.topic_partition import TopicPartition


async def handle(ctx: RequestContext, request) -> dict:
    rm = ctx.broker.replica_manager
    wanted: dict[TopicPartition, str] = {}
    for d in request.dirs:
        for topic in d.topics:
            for partition in topic.partitions:
                wanted[TopicPartition(topic.name, int(partition))] = d.path
    results: dict[str, list[dict]] = {}
    allowed = cluster_allowed(ctx, Op.ALTER)  # Kafka: ALTER on the cluster, else every partition refused
    for tp, path in wanted.items():
        code = rm.alter_replica_log_dir(tp, path) if allowed else ErrorCode.cluster_authorization_failed
        results.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": code})
    return {"throttle_time": 0,
            "results": [{"topic_name": name, "partitions": ps} for name, ps in results.items()]}
