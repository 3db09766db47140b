"""Per-group configs (Kafka 4's GROUP config resource, KIP-848) through the dispatch table on a real
single-node broker: IncrementalAlterConfigs sets `consumer.heartbeat.interval.ms` /
`consumer.session.timeout.ms` on a group, its next ConsumerGroupHeartbeat answers them and its
session timer follows; values outside the broker's bounds and unknown keys are INVALID_CONFIG;
DescribeConfigs shows each key's source; a DELETE restores the broker's value; AlterConfigs
replaces the set; a restart keeps them; DESCRIBE_CONFIGS / ALTER_CONFIGS on the group decide."""

import functools

import pytest
import trio
from brokerkit import ask, running, start

from kbroker.api.authorization import AclOperation, ResourceType
from kbroker.errors import ErrorCode as E

HEARTBEAT, DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 68, 32, 33, 44
GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
HB, SESSION = "consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5




@pytest.fixture
def broker(tmp_path):
    yield from running(tmp_path, 2)




def alter(broker, *ops, group="g", validate_only=False):
    body = ask(broker, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": GROUP, "resource_name": group,
        "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": validate_only})
    r = body.responses[0]
    assert (r.resource_type, r.resource_name) == (GROUP, group)
    return r.error_code, r.error_message


def describe(broker, group="g", keys=None):
    body = ask(broker, DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": GROUP, "resource_name": group, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": True})
    result = body.results[0]
    assert result.error_code == E.none, result.error_message
    return {c.name: c for c in result.configs}


def beat(broker, member_id, epoch, group="g"):
    topic_id = broker.metadata.topic("t").topic_id
    return ask(broker, HEARTBEAT, 1, {
        "group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None, "rack_id": None,
        "rebalance_timeout": 30000 if epoch == 0 else -1,
        "subscribed_topic_names": ["t"] if epoch == 0 else None, "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": [{"topic_id": topic_id, "partitions": []}] if epoch == 0 else None})


def interval_ms(response) -> int:
    return int(response.heartbeat_interval.total_seconds() * 1000)


def session_deadline(broker, group="g", member="m1") -> int:
    return broker.group_coordinator.timers.deadline(("chb", group, member))


def test_a_groups_heartbeat_interval_is_answered_and_a_delete_restores_the_brokers(broker):
    r = beat(broker, "m1", 0)
    assert r.error_code == E.none and interval_ms(r) == 5000
    assert alter(broker, (HB, SET, "6000")) == (E.none, None)
    r = beat(broker, "m1", r.member_epoch)
    assert r.error_code == E.none and interval_ms(r) == 6000
    assert interval_ms(beat(broker, "m1", 0, group="other")) == 5000  # only g's

    described = describe(broker)
    assert (described[HB].value, described[HB].config_source) == ("6000", GROUP_CONFIG)
    assert [(s.name, s.value, s.source) for s in described[HB].synonyms] == [(HB, "6000", GROUP_CONFIG)]
    assert (described[SESSION].value, described[SESSION].config_source) == ("45000", DEFAULT_CONFIG)
    assert described[HB].config_type == 3 and not described[HB].read_only  # INT
    assert described[HB].documentation == "The heartbeat interval given to the members of a consumer group."
    assert set(describe(broker, keys=[SESSION])) == {SESSION}

    assert alter(broker, (HB, DELETE, None)) == (E.none, None)
    assert (describe(broker)[HB].value, describe(broker)[HB].config_source) == ("5000", DEFAULT_CONFIG)
    assert interval_ms(beat(broker, "m1", r.member_epoch)) == 5000
    assert broker.metadata.group_configs("g") == {}  # nothing left: no entry


def test_the_session_timer_follows_the_groups_session_timeout(broker):
    now = broker.group_coordinator.clock()
    r = beat(broker, "m1", 0)
    assert 45000 <= session_deadline(broker) - now < 50000
    assert alter(broker, (SESSION, SET, "60000")) == (E.none, None)
    now = broker.group_coordinator.clock()
    beat(broker, "m1", r.member_epoch)
    assert 60000 <= session_deadline(broker) - now < 65000


def test_values_out_of_bounds_and_unknown_keys_are_invalid_config(broker):
    assert alter(broker, (HB, SET, "1000")) == (
        E.invalid_config, "consumer.heartbeat.interval.ms must be greater than or equal to "
                          "group.consumer.min.heartbeat.interval.ms")
    assert alter(broker, (SESSION, SET, "90000")) == (
        E.invalid_config, "consumer.session.timeout.ms must be less than or equal to "
                          "group.consumer.max.session.timeout.ms")
    assert alter(broker, ("consumer.rebalance.timeout.ms", SET, "1")) == (
        E.invalid_config, "Unknown group config name: consumer.rebalance.timeout.ms")
    assert alter(broker, (HB, SET, "fast")) == (
        E.invalid_config, "Invalid value fast for configuration consumer.heartbeat.interval.ms: "
                          "Not a number of type INT")
    assert alter(broker, (HB, APPEND, "6000")) == (
        E.invalid_config, "Can't APPEND to key consumer.heartbeat.interval.ms because its type is not LIST.")
    assert alter(broker, (HB, SET, "6000"), group="") == (E.invalid_request, "Default group resources are not allowed.")
    assert alter(broker, (HB, SET, None))[0] == E.invalid_request  # a null value outside DELETE
    # one refused key refuses the resource's whole change
    assert alter(broker, (HB, SET, "6000"), (SESSION, SET, "1"))[0] == E.invalid_config
    assert alter(broker, (HB, SET, "6000"), validate_only=True) == (E.none, None)
    assert broker.metadata.group_configs("g") == {}
    assert describe(broker)[HB].config_source == DEFAULT_CONFIG
    body = ask(broker, DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": GROUP, "resource_name": "", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    assert (body.results[0].error_code, body.results[0].error_message) == (
        E.invalid_request, "Group name must not be empty")


def test_legacy_alter_configs_replaces_the_groups_set(broker):
    def legacy(configs):
        body = ask(broker, ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": GROUP, "resource_name": "g",
            "configs": [{"name": n, "value": v} for n, v in configs.items()]}], "validate_only": False})
        return body.responses[0].error_code, body.responses[0].error_message

    assert legacy({HB: "7000", SESSION: "50000"}) == (E.none, None)
    assert broker.metadata.group_configs("g") == {HB: "7000", SESSION: "50000"}
    assert legacy({SESSION: "55000"}) == (E.none, None)  # the heartbeat interval goes back to the broker's
    assert broker.metadata.group_configs("g") == {SESSION: "55000"}
    assert legacy({HB: "99999"})[0] == E.invalid_config
    assert broker.metadata.group_configs("g") == {SESSION: "55000"}


def test_a_restart_keeps_a_groups_configs(tmp_path):
    b = start(tmp_path)
    try:
        trio.run(functools.partial(b.create_topic, "t", num_partitions=2))
        assert alter(b, (HB, SET, "8000"), (SESSION, SET, "50000")) == (E.none, None)
    finally:
        b.shutdown()
    b = start(tmp_path)
    try:
        described = describe(b)
        assert (described[HB].value, described[HB].config_source) == ("8000", GROUP_CONFIG)
        assert (described[SESSION].value, described[SESSION].config_source) == ("50000", GROUP_CONFIG)
        assert interval_ms(beat(b, "m1", 0)) == 8000
    finally:
        b.shutdown()


def test_describe_and_alter_need_the_groups_config_permissions(broker):
    class GroupConfigsDenied:
        def authorize(self, ctx, resource_type, name, operations):
            denied = resource_type == ResourceType.GROUP and name == "secret"
            return frozenset(op for op in operations if not denied or op not in (
                AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS))

    broker.authorizer = GroupConfigsDenied()
    assert alter(broker, (HB, SET, "6000"), group="secret")[0] == E.group_authorization_failed
    body = ask(broker, DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": GROUP, "resource_name": "secret", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    assert body.results[0].error_code == E.group_authorization_failed and not body.results[0].configs
    assert broker.metadata.group_configs("secret") == {}
    assert alter(broker, (HB, SET, "6000"), group="open") == (E.none, None)
