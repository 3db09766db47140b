"""DescribeProducers (KIP-664): each partition's active producers, for operators looking for a
hanging transaction (Kafka's `kafka-transactions.sh describe-producers`, `Admin.describeProducers`).

Kafka's rules (KafkaApis.handleDescribeProducersRequest, ReplicaManager and
Partition.activeProducerState): an illegal topic name is INVALID_TOPIC_EXCEPTION and an unknown
topic or partition UNKNOWN_TOPIC_OR_PARTITION; a partition of which this broker holds no replica is
NOT_LEADER_OR_FOLLOWER. Any replica answers from its own producer state, a follower too: the admin
client asks the leader unless told which broker to ask.
"""

from __future__ import annotations

from kbroker.api.access import Op, topic_allowed
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.log.topic_partition import TopicPartition
from kbroker.metadata.store import validate_topic_name
from kbroker.replica.manager import ReplicaManager


async def handle(ctx: RequestContext, request) -> dict:
    rm = ctx.broker.replica_manager
    topics = []
    for topic in request.topics:
        if not topic_allowed(ctx, Op.READ, topic.name):  # Kafka: READ on the topic
            partitions = [{"partition_index": int(index), "error_code": ErrorCode.topic_authorization_failed,
                           "error_message": None, "active_producers": []} for index in topic.partition_indexes]
        else:
            partitions = [_describe_partition(rm, topic.name, int(index)) for index in topic.partition_indexes]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _describe_partition(rm: ReplicaManager, topic: str, index: int) -> dict:
    try:
        validate_topic_name(topic)
        producers = rm.get_partition(TopicPartition(topic, index)).log.active_producers()
    except KafkaError as exc:
        return {"partition_index": index, "error_code": error_code_of(exc), "error_message": str(exc) or None,
                "active_producers": []}
    return {"partition_index": index, "error_code": ErrorCode.none,
            "active_producers": [producer._asdict() for producer in producers]}
