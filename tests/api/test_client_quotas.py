"""DescribeClientQuotas and AlterClientQuotas (v0, v1) through the dispatch table on a real
single-node broker — Kafka's ZooKeeper-mode semantics and errors — and the quotas enforced on the
request path: throttle_time_ms in the answers, the connection told to mute, Fetch capped and
answered empty when throttled, followers exempt, request time, controller mutations (strict and
permissive), and nothing recorded at all while no quota is configured."""

import functools

import pytest
import trio

from kbroker.api.dispatch import DISPATCH, handle_frame
from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.errors import ErrorCode
from kbroker.security.principal import KafkaPrincipal
from kbroker.security.session import ConnectionSession
from kbroker.wire.protocol import decode_response, encode_request, to_ms
from kbroker.wire.records import Record, build_batch

DESCRIBE, ALTER = 48, 49
PRODUCE, FETCH, CREATE_TOPICS, CREATE_PARTITIONS, DELETE_TOPICS, METADATA = 0, 1, 19, 37, 20, 3
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def make_broker(path):
    b = Broker(BrokerConfig.from_dict({"log.dirs": str(path)}), ("127.0.0.1", 9092))
    b.startup()
    return b


@pytest.fixture
def broker(tmp_path):
    b = make_broker(tmp_path)
    yield b
    b.shutdown()


def session_of(user):
    return ConnectionSession("PLAINTEXT", "PLAINTEXT", principal=KafkaPrincipal("User", user))


def call(broker, api_key, data, version=1, client_id="test", session=None, throttles=None, raw=False):
    frame = encode_request(api_key, version, 9, client_id, data)
    muted = throttles.append if throttles is not None else None
    response = trio.run(functools.partial(handle_frame, broker, bytearray(frame[4:]), "127.0.0.1", session, muted))
    if response is None:
        return None
    if isinstance(response, list):
        response = b"".join(c if isinstance(c, (bytes, bytearray)) else c.read() for c in response)
    correlation_id, body = decode_response(api_key, version, response[4:])
    assert correlation_id == 9
    return body


def entity(**parts):
    return [{"entity_type": k.replace("_", "-"), "entity_name": v} for k, v in parts.items()]


def alter(broker, entries, validate_only=False, version=1):
    body = call(broker, ALTER, {"entries": entries, "validate_only": validate_only}, version)
    return [({e.entity_type: e.entity_name for e in r.entity}, r.error_code, r.error_message) for r in body.entries]


def op(key, value=None):
    return {"key": key, "value": 0.0 if value is None else float(value), "remove": value is None}


def describe(broker, components=(), strict=False, version=1):
    body = call(broker, DESCRIBE, {"components": list(components), "strict": strict}, version)
    if body.error_code != ErrorCode.none:
        return body.error_code, body.error_message
    return sorted((tuple(sorted((e.entity_type, e.entity_name or "<default>") for e in entry.entity)),
                   tuple(sorted((v.key, v.value) for v in entry.values))) for entry in body.entries)


def component(entity_type, match_type, match=None):
    return {"entity_type": entity_type, "match_type": match_type, "match": match}


def test_served_at_v0_and_v1():
    for key, name in ((DESCRIBE, "DescribeClientQuotas"), (ALTER, "AlterClientQuotas")):
        spec = DISPATCH[key]
        assert (spec.name, spec.min_version, spec.max_version, spec.cluster_only) == (name, 0, 1, False)


@pytest.fixture
def configured(broker):
    assert alter(broker, [
        {"entity": entity(user="alice"), "ops": [op("producer_byte_rate", 1024), op("request_percentage", 50)]},
        {"entity": entity(user=None), "ops": [op("consumer_byte_rate", 2048)]},
        {"entity": entity(user="alice", client_id="app"), "ops": [op("controller_mutation_rate", 3)]},
        {"entity": entity(user=None, client_id=None), "ops": [op("producer_byte_rate", 10)]},
        {"entity": entity(client_id="app"), "ops": [op("consumer_byte_rate", 4096)]},
        {"entity": entity(client_id=None), "ops": [op("producer_byte_rate", 99)]},
    ]) == [({"user": "alice"}, 0, None), ({"user": None}, 0, None),
           ({"user": "alice", "client-id": "app"}, 0, None), ({"user": None, "client-id": None}, 0, None),
           ({"client-id": "app"}, 0, None), ({"client-id": None}, 0, None)]
    return broker


ALICE = ((("user", "alice"),), (("producer_byte_rate", 1024.0), ("request_percentage", 50.0)))
DEFAULT_USER = ((("user", "<default>"),), (("consumer_byte_rate", 2048.0),))
ALICE_APP = ((("client-id", "app"), ("user", "alice")), (("controller_mutation_rate", 3.0),))
DEFAULTS = ((("client-id", "<default>"), ("user", "<default>")), (("producer_byte_rate", 10.0),))
APP = ((("client-id", "app"),), (("consumer_byte_rate", 4096.0),))
DEFAULT_CLIENT = ((("client-id", "<default>"),), (("producer_byte_rate", 99.0),))


@pytest.mark.parametrize("version", [0, 1])
def test_describe_filters_as_kafka(configured, version):
    b = configured
    everything = sorted([ALICE, DEFAULT_USER, ALICE_APP, DEFAULTS, APP, DEFAULT_CLIENT])
    assert describe(b, version=version) == everything
    assert describe(b, strict=True, version=version) == []  # strict with no component: nothing
    assert describe(b, [component("user", EXACT, "alice")], version=version) == sorted([ALICE, ALICE_APP])
    assert describe(b, [component("user", EXACT, "alice")], strict=True, version=version) == [ALICE]
    assert describe(b, [component("user", DEFAULT)], version=version) == sorted([DEFAULT_USER, DEFAULTS])
    assert describe(b, [component("user", SPECIFIED)], strict=True, version=version) == sorted([ALICE, DEFAULT_USER])
    assert describe(b, [component("user", SPECIFIED), component("client-id", SPECIFIED)], strict=True,
                    version=version) == sorted([ALICE_APP, DEFAULTS])
    assert describe(b, [component("client-id", EXACT, "app")], version=version) == sorted([APP, ALICE_APP])
    assert describe(b, [component("client-id", DEFAULT)], strict=True, version=version) == [DEFAULT_CLIENT]
    assert describe(b, [component("user", EXACT, "bob")], version=version) == []


def test_describe_refuses_bad_filters_with_kafkas_errors(configured):
    b = configured
    assert describe(b, [component("user", EXACT, "a"), component("user", DEFAULT)]) == (
        ErrorCode.invalid_request, "Duplicate user filter component entity type")
    assert describe(b, [component("", SPECIFIED)]) == (
        ErrorCode.invalid_request, "Unexpected empty filter component entity type")
    assert describe(b, [component("group", SPECIFIED)]) == (
        ErrorCode.unsupported_version, "Custom entity type 'group' not supported")
    assert describe(b, [component("ip", SPECIFIED), component("user", SPECIFIED)])[0] == ErrorCode.invalid_request
    assert describe(b, [component("user", 7)]) == (ErrorCode.unknown_server_error, "Unexpected match type: 7")
    assert describe(b, [component("ip", SPECIFIED)]) == []  # no IP quotas are kept


def test_alter_errors_are_per_entity_and_nothing_of_a_refused_one_applies(broker):
    results = alter(broker, [
        {"entity": [], "ops": [op("producer_byte_rate", 1)]},
        {"entity": entity(group="g"), "ops": [op("producer_byte_rate", 1)]},
        {"entity": entity(user=""), "ops": [op("producer_byte_rate", 1)]},
        {"entity": entity(user="a"), "ops": [op("producer_byte_rate", 5), op("foo", 1)]},
        {"entity": entity(user="b"), "ops": [op("producer_byte_rate", 1.5)]},
        {"entity": entity(user="c"), "ops": [op("request_percentage", 0)]},
        {"entity": entity(ip="1.2.3.4"), "ops": [op("connection_creation_rate", 1)]},
        {"entity": entity(ip="1.2.3.4", user="d"), "ops": [op("connection_creation_rate", 1)]},
        {"entity": entity(user="ok"), "ops": [op("producer_byte_rate", 1e6), op("request_percentage", 12.5)]},
    ])
    assert [(r[1], r[2]) for r in results] == [
        (ErrorCode.invalid_request, "Invalid empty client quota entity"),
        (ErrorCode.invalid_request, "Unhandled client quota entity type: group"),
        (ErrorCode.invalid_request, "Empty user not supported"),
        (ErrorCode.invalid_request, "Invalid configuration key foo"),
        (ErrorCode.invalid_request, "Configuration producer_byte_rate must be a LONG value"),
        (ErrorCode.invalid_request, "Quota request_percentage must be greater than 0"),
        (ErrorCode.invalid_request, "IP quotas (connection_creation_rate) are not supported by kbroker"),
        (ErrorCode.invalid_request,
         "Invalid quota entity combination, IP entity should not be used with user/client ID entity."),
        (ErrorCode.none, None),
    ]
    assert describe(broker) == [((("user", "ok"),), (("producer_byte_rate", 1e6), ("request_percentage", 12.5)))]
    assert broker.client_quotas.produce.quota("ok", "x") == 1e6


def test_validate_only_writes_nothing_and_removals_drop_the_entity(broker, tmp_path):
    assert alter(broker, [{"entity": entity(user="u"), "ops": [op("producer_byte_rate", 100)]}],
                 validate_only=True) == [({"user": "u"}, 0, None)]
    assert describe(broker) == [] and not broker.client_quotas.active
    alter(broker, [{"entity": entity(user="u"), "ops": [op("producer_byte_rate", 100), op("consumer_byte_rate", 7)]}])
    assert alter(broker, [{"entity": entity(user="u"), "ops": [op("producer_byte_rate"), op("request_percentage")]}]) \
        == [({"user": "u"}, 0, None)]  # removing a key that is not set is no error
    assert describe(broker) == [((("user", "u"),), (("consumer_byte_rate", 7.0),))]
    alter(broker, [{"entity": entity(user="u"), "ops": [op("consumer_byte_rate")]}])
    assert describe(broker) == [] and not broker.client_quotas.active
    assert (tmp_path / "kbroker-client-quotas.json").read_text().count('"users/') == 0


def test_quotas_survive_a_restart_beside_scram_credentials(tmp_path):
    from kbroker.security.credentials import make_credential

    b = make_broker(tmp_path)
    b.metadata.alter_scram_credentials("alice", {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "pw", 4096)})
    alter(b, [{"entity": entity(user="alice"), "ops": [op("producer_byte_rate", 500)]},
              {"entity": entity(user="CN=x y", client_id="c/1"), "ops": [op("consumer_byte_rate", 9)]}])
    b.shutdown()
    b = make_broker(tmp_path)
    try:
        assert b.client_quotas.produce.quota("alice", "any") == 500.0
        assert b.client_quotas.fetch.quota("CN=x y", "c/1") == 9.0
        assert describe(b, [component("user", EXACT, "CN=x y")], strict=False) == [
            ((("client-id", "c/1"), ("user", "CN=x y")), (("consumer_byte_rate", 9.0),))]
        alter(b, [{"entity": entity(user="alice"), "ops": [op("producer_byte_rate")]}])
        assert b.metadata.scram_credential("alice", "SCRAM-SHA-512") is not None  # the credential stays
    finally:
        b.shutdown()


def test_both_apis_need_the_clusters_config_permissions(broker):
    from kbroker.api.authorization import AclOperation

    class DenyConfigs:
        def authorize(self, ctx, resource_type, name, operations):
            return frozenset(op for op in operations
                             if op not in (AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS))

    broker.authorizer = DenyConfigs()
    body = call(broker, DESCRIBE, {"components": [], "strict": False})
    assert body.error_code == ErrorCode.cluster_authorization_failed and body.entries is None
    assert alter(broker, [{"entity": entity(user="u"), "ops": [op("producer_byte_rate", 1)]}]) == [
        ({"user": "u"}, ErrorCode.cluster_authorization_failed, None)]
    assert not broker.client_quotas.active


# -- enforcement -------------------------------------------------------------------------------------

def produce(broker, size, acks=1, client_id="test", session=None, throttles=None, version=9, topic="t"):
    batch = build_batch([Record(0, 1_000, None, b"x" * size, [])])
    data = {"transactional_id": None, "acks": acks, "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    return call(broker, PRODUCE, data, version, client_id, session, throttles)


def fetch(broker, client_id="test", replica_id=-1, max_bytes=1 << 24, throttles=None, version=12, session=None):
    body = {"replica_id": replica_id, "max_wait": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t", "topic_id": broker.metadata.topic("t").topic_id,
                        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 24}]}]}
    return call(broker, FETCH, body, version, client_id, session, throttles)


@pytest.fixture
def topic(broker):
    trio.run(functools.partial(broker.create_topic, "t", num_partitions=1))
    return broker


def test_nothing_is_recorded_while_no_quota_is_configured(topic):
    throttles = []
    assert to_ms(produce(topic, 10_000, throttles=throttles).throttle_time) == 0
    assert to_ms(fetch(topic, throttles=throttles).throttle_time) == 0
    assert throttles == [] and not topic.client_quotas.active
    assert not any(m._sensors for m in topic.client_quotas.managers())


def test_a_producer_over_its_quota_is_throttled_and_muted(topic):
    alter(topic, [{"entity": entity(client_id="greedy"), "ops": [op("producer_byte_rate", 1000)]}])
    throttles = []
    first = produce(topic, 5_000, client_id="greedy", throttles=throttles)
    assert to_ms(first.throttle_time) == 0 and throttles == []
    second = produce(topic, 20_000, client_id="greedy", throttles=throttles)
    ms = to_ms(second.throttle_time)
    assert ms > 10_000 and throttles == [ms]  # appended all the same, answered with the time, muted
    assert second.responses[0].partition_responses[0].error_code == ErrorCode.none
    assert to_ms(produce(topic, 50_000, client_id="other", throttles=throttles).throttle_time) == 0
    assert produce(topic, 50_000, acks=0, client_id="greedy", throttles=throttles) is None
    assert len(throttles) == 2  # acks=0: no answer, the connection is muted still


def test_a_user_quota_follows_the_principal(topic):
    alter(topic, [{"entity": entity(user="alice"), "ops": [op("producer_byte_rate", 100)]},
                  {"entity": entity(user="ANONYMOUS"), "ops": [op("producer_byte_rate", 1e9)]}])
    assert to_ms(produce(topic, 20_000, session=session_of("alice")).throttle_time) > 0
    assert to_ms(produce(topic, 20_000, session=session_of("bob")).throttle_time) == 0
    assert to_ms(produce(topic, 20_000).throttle_time) == 0  # in-process: User:ANONYMOUS


def test_a_throttled_fetch_is_answered_empty_and_its_bytes_taken_back(topic):
    for _ in range(3):
        produce(topic, 3_000)
    alter(topic, [{"entity": entity(client_id="c"), "ops": [op("consumer_byte_rate", 500)]}])
    throttles = []
    first = fetch(topic, client_id="c", throttles=throttles)
    got = first.responses[0].partitions[0].records
    assert to_ms(first.throttle_time) == 0 and len(got) > 3_000  # within the window's 5000 bytes
    second = fetch(topic, client_id="c", throttles=throttles)
    ms = to_ms(second.throttle_time)
    assert ms > 0 and second.responses == () and throttles == [ms]
    sensor = topic.client_quotas.fetch.sensor("test", "c")  # only the first answer is counted
    assert sensor.rate.total(topic.client_quotas.clock()) < 2 * len(got)


def test_a_fetch_is_capped_to_the_quota_window(topic):
    for _ in range(4):
        produce(topic, 3_000)
    alter(topic, [{"entity": entity(client_id="c"), "ops": [op("consumer_byte_rate", 400)]}])
    # 400 B/s x 10 windows = 4000 bytes: one batch (a first batch always goes, KIP-74), not four
    records = fetch(topic, client_id="c").responses[0].partitions[0].records
    assert 3_000 < len(records) < 6_000


def test_followers_are_never_throttled_by_client_quotas(topic):
    produce(topic, 3_000)
    alter(topic, [{"entity": entity(client_id=None), "ops": [op("consumer_byte_rate", 1),
                                                            op("request_percentage", 0.0001)]}])
    throttles = []
    for _ in range(3):
        assert to_ms(fetch(topic, client_id="replica", replica_id=1, throttles=throttles).throttle_time) == 0
    assert throttles == []
    assert not topic.client_quotas.fetch._sensors and not topic.client_quotas.request._sensors


def test_request_time_is_throttled_at_most_one_window(topic):
    alter(topic, [{"entity": entity(client_id="busy"), "ops": [op("request_percentage", 0.00001)]}])
    throttles = []
    body = call(topic, METADATA, {"topics": None, "allow_auto_topic_creation": False}, 9, "busy", throttles=throttles)
    assert 0 < to_ms(body.throttle_time) <= 1000 and throttles == [to_ms(body.throttle_time)]
    answer = call(topic, DESCRIBE, {"components": [], "strict": False}, 1, "busy")
    assert 0 < to_ms(answer.throttle_time) <= 1000  # every answer with the field carries it
    assert to_ms(call(topic, METADATA, {"topics": None, "allow_auto_topic_creation": False}, 9,
                      "calm").throttle_time) == 0


def create(broker, names, partitions, version, client_id="admin"):
    body = call(broker, CREATE_TOPICS, {"topics": [{"name": n, "num_partitions": partitions, "replication_factor": 1,
                                                    "assignments": [], "configs": []} for n in names],
                                        "timeout": 5000, "validate_only": False}, version, client_id)
    return to_ms(body.throttle_time), [(t.name, t.error_code, t.error_message) for t in body.topics]


def test_controller_mutations_strict_from_create_topics_v6(broker):
    alter(broker, [{"entity": entity(client_id="admin"), "ops": [op("controller_mutation_rate", 1)]}])
    # the bucket holds 11 windows x 1/s: 12 partitions are accepted (it is not below zero before)
    throttle, results = create(broker, ["a", "b"], 12, version=6)
    assert results[0] == ("a", ErrorCode.none, None)
    assert results[1] == ("b", ErrorCode.throttling_quota_exceeded, "The throttling quota has been exceeded.")
    assert 900 <= throttle <= 1000  # one token short: a second at 1 per second
    assert broker.metadata.topic("b") is None
    # CreateTopics v5 is permissive: created, and throttled for what it overspent
    throttle, results = create(broker, ["c"], 5, version=5)
    assert results == [("c", ErrorCode.none, None)] and throttle >= 5000
    body = call(broker, DELETE_TOPICS, {"topic_names": ["a"], "timeout": 5000}, 5, "admin")
    assert body.responses[0].error_code == ErrorCode.throttling_quota_exceeded and to_ms(body.throttle_time) > 0
    body = call(broker, CREATE_PARTITIONS, {"topics": [{"name": "c", "count": 6, "assignments": None}],
                                            "timeout": 5000, "validate_only": False}, 3, "admin")
    assert body.results[0].error_code == ErrorCode.throttling_quota_exceeded
    _, results = create(broker, ["d"], 3, version=6, client_id="someone-else")
    assert results == [("d", ErrorCode.none, None)]
