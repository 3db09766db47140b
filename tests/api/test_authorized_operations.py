"""KIP-430 authorized operations through the dispatch table on a real single-node broker: Metadata
(v8+ topics, v8-v10 cluster), DescribeCluster and DescribeGroups (v3+) answer Kafka's bit sets when
asked (no authorizer: every operation the resource type supports) and -2**31 when not."""

import functools

import pytest
import trio

from kbroker.api.authorization import AclOperation as Op, ResourceType, authorized_operations
from kbroker.api.dispatch import DISPATCH, handle_frame
from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.wire.protocol import decode_response, encode_request

METADATA, DESCRIBE_GROUPS, DESCRIBE_CLUSTER = 3, 15, 60
NOT_ASKED = -2147483648
# Kafka's AclEntry.supportedOperations, by hand: the bits clients decode
TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # READ..ALTER, DESCRIBE, DESCRIBE/ALTER_CONFIGS
CLUSTER_OPS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, ...
GROUP_OPS = sum(1 << op for op in (3, 6, 8, 10, 11))  # READ, DELETE, DESCRIBE, DESCRIBE/ALTER_CONFIGS


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = Broker(BrokerConfig.from_dict({"log.dirs": str(tmp_path_factory.mktemp("authops"))}), ("127.0.0.1", 9092))
    b.startup()
    trio.run(functools.partial(b.create_topic, "ops", num_partitions=1))
    yield b
    b.shutdown()


def call(broker, api_key, version, body):
    frame = encode_request(api_key, version, 7, "test", body)
    response = trio.run(handle_frame, broker, bytearray(frame[4:]))
    correlation_id, decoded = decode_response(api_key, version, response[4:])
    assert correlation_id == 7
    return decoded


def test_bit_sets_are_kafkas():
    assert TOPIC_OPS == 3576 and CLUSTER_OPS == 8096 and GROUP_OPS == 3400
    assert authorized_operations(ResourceType.TOPIC, "t", None) == TOPIC_OPS
    assert authorized_operations(ResourceType.CLUSTER, "kafka-cluster", None) == CLUSTER_OPS
    assert authorized_operations(ResourceType.GROUP, "g", None) == GROUP_OPS


def test_an_authorizer_narrows_the_supported_operations():
    class ReadOnly:
        def authorize(self, ctx, resource_type, name, operations):
            return frozenset({Op.READ, Op.DESCRIBE, Op.CLUSTER_ACTION})  # CLUSTER_ACTION: not a topic's

    assert authorized_operations(ResourceType.TOPIC, "t", None, ReadOnly()) == (1 << 3) | (1 << 8)


@pytest.mark.parametrize("version", range(8, DISPATCH[METADATA].max_version + 1))
@pytest.mark.parametrize("asked", [True, False])
def test_metadata(broker, version, asked):
    body = {"topics": [{"name": "ops", "topic_id": None}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": asked}
    if version <= 10:
        body["include_cluster_authorized_operations"] = asked
    response = call(broker, METADATA, version, body)
    (topic,) = response.topics
    assert topic.topic_authorized_operations == (TOPIC_OPS if asked else NOT_ASKED)
    if version <= 10:
        assert response.cluster_authorized_operations == (CLUSTER_OPS if asked else NOT_ASKED)


def test_metadata_cluster_operations_alone(broker):
    response = call(broker, METADATA, 10, {"topics": [{"name": "ops", "topic_id": None}],
                                           "allow_auto_topic_creation": False,
                                           "include_cluster_authorized_operations": True,
                                           "include_topic_authorized_operations": False})
    assert response.cluster_authorized_operations == CLUSTER_OPS
    assert response.topics[0].topic_authorized_operations == NOT_ASKED


@pytest.mark.parametrize("version", range(DISPATCH[DESCRIBE_CLUSTER].min_version,
                                          DISPATCH[DESCRIBE_CLUSTER].max_version + 1))
@pytest.mark.parametrize("asked", [True, False])
def test_describe_cluster(broker, version, asked):
    body = {"include_cluster_authorized_operations": asked}
    if version >= 1:
        body["endpoint_type"] = 1
    response = call(broker, DESCRIBE_CLUSTER, version, body)
    assert response.cluster_authorized_operations == (CLUSTER_OPS if asked else NOT_ASKED)


@pytest.mark.parametrize("version", range(3, DISPATCH[DESCRIBE_GROUPS].max_version + 1))
@pytest.mark.parametrize("asked", [True, False])
def test_describe_groups(broker, version, asked):
    response = call(broker, DESCRIBE_GROUPS, version, {"groups": ["nobody-here"], "include_authorized_operations": asked})
    (group,) = response.groups
    if version >= 6:  # KIP-1043: an unknown group is GROUP_ID_NOT_FOUND, and described without operations
        assert (group.error_code, group.authorized_operations) == (69, NOT_ASKED)
        return
    assert group.error_code == 0
    assert group.authorized_operations == (GROUP_OPS if asked else NOT_ASKED)


@pytest.mark.parametrize("endpoint_type, error_code, message", [
    (2, 114, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"),
    (0, 115, "Unsupported endpoint type 0"), (3, 115, "Unsupported endpoint type 3")])
def test_describe_cluster_answers_for_brokers_only(broker, endpoint_type, error_code, message):
    """v1's endpoint type: a broker answers MISMATCHED_ENDPOINT_TYPE when asked for the controllers
    (an Admin with bootstrap.controllers), UNSUPPORTED_ENDPOINT_TYPE for a type Kafka does not know."""
    response = call(broker, DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True,
                                                  "endpoint_type": endpoint_type})
    assert (response.error_code, response.error_message) == (error_code, message)
    assert (response.brokers, response.controller_id) == ((), -1)
