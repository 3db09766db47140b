"""DescribeConfigs / AlterConfigs / IncrementalAlterConfigs of broker resources: Kafka's dynamic
broker configs (this broker's id, or the empty name for the cluster-wide default), static keys
refused as Kafka refuses them; on the single node, kept beside the metadata and applied to logs."""

from types import SimpleNamespace

import trio

from kbroker.api import configs
from kbroker.config import BrokerConfig, ConfigSource
from kbroker.dynamic_config import apply_stored
from kbroker.errors import ErrorCode

RATE = "leader.replication.throttled.rate"


class FakeBroker:
    """What the handlers use of a cluster broker, with its dynamic configs in a dict (ZooKeeper's part)."""

    node_id = 3

    def __init__(self) -> None:
        self.config = BrokerConfig.from_dict({"num.partitions": "4"})
        self.stored: dict[str, dict[str, str]] = {}
        self.metadata = SimpleNamespace(topic=lambda name: None)

    async def broker_configs(self, entity):
        return dict(self.stored.get(entity, {}))

    async def set_broker_configs(self, entity, new):
        self.stored[entity] = dict(new)
        self.apply()

    def apply(self):
        apply_stored(self.config, self.stored.get("3", {}), self.stored.get("<default>", {}))


def _run(handler, broker, **request):
    return trio.run(handler, SimpleNamespace(broker=broker, version=1), SimpleNamespace(**request))


def _op(name, value, operation):
    return SimpleNamespace(name=name, value=value, config_operation=operation)


def _incremental(broker, name, *ops, validate_only=False):
    resource = SimpleNamespace(resource_type=configs.BROKER, resource_name=name, configs=list(ops))
    return _run(configs.incremental_alter_configs, broker, resources=[resource],
                validate_only=validate_only)["responses"][0]


def _describe(broker, name="3"):
    resource = SimpleNamespace(resource_type=configs.BROKER, resource_name=name, configuration_keys=None)
    result = _run(configs.describe_configs, broker, resources=[resource], include_synonyms=True)["results"][0]
    return {c["name"]: c for c in result["configs"]}


def test_the_throttle_rates_are_described_with_their_source():
    broker = FakeBroker()
    described = _describe(broker)
    assert described[RATE]["value"] == str(2**63 - 1) and described[RATE]["config_source"] == ConfigSource.DEFAULT_CONFIG
    assert not described[RATE]["read_only"] and described["num.partitions"]["read_only"]
    broker.stored = {"<default>": {RATE: "500"}}
    broker.apply()
    assert (_describe(broker)[RATE]["value"], _describe(broker)[RATE]["config_source"]) == (
        "500", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    broker.stored["3"] = {RATE: "700"}
    broker.apply()
    described = _describe(broker)[RATE]
    assert (described["value"], described["config_source"]) == ("700", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [s["source"] for s in described["synonyms"]] == [
        ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG]


def test_incremental_alter_sets_and_deletes_this_brokers_rates():
    broker = FakeBroker()
    answer = _incremental(broker, "3", _op(RATE, "1000000", configs.SET),
                          _op("follower.replication.throttled.rate", "2000000", configs.SET))
    assert answer["error_code"] == ErrorCode.none
    assert broker.stored["3"] == {RATE: "1000000", "follower.replication.throttled.rate": "2000000"}
    # deleting, also a key that is not set, or that kbroker does not know
    answer = _incremental(broker, "3", _op(RATE, None, configs.DELETE),
                          _op("replica.alter.log.dirs.io.max.bytes.per.second", None, configs.DELETE),
                          _op("no.such.key", None, configs.DELETE))
    assert answer["error_code"] == ErrorCode.none and broker.stored["3"] == {"follower.replication.throttled.rate": "2000000"}


def test_the_empty_name_is_the_cluster_wide_default():
    broker = FakeBroker()
    assert _incremental(broker, "", _op(RATE, "5", configs.SET))["error_code"] == ErrorCode.none
    assert broker.stored == {"<default>": {RATE: "5"}}


def test_refusals():
    broker = FakeBroker()
    assert _incremental(broker, "4", _op(RATE, "5", configs.SET))["error_code"] == ErrorCode.invalid_request
    assert _incremental(broker, "3", _op("num.partitions", "5", configs.SET))["error_code"] == ErrorCode.invalid_config
    assert _incremental(broker, "3", _op("process.roles", "broker", configs.SET))["error_code"] == \
        ErrorCode.invalid_config  # a static key of Kafka's kbroker does not define
    assert _incremental(broker, "3", _op("no.such.key", "5", configs.APPEND))["error_code"] == ErrorCode.invalid_config
    assert _incremental(broker, "3", _op(RATE, "-1", configs.SET))["error_code"] == ErrorCode.invalid_config
    assert _incremental(broker, "3", _op(RATE, "fast", configs.SET))["error_code"] == ErrorCode.invalid_config
    assert _incremental(broker, "3", _op(RATE, "5", configs.APPEND))["error_code"] == ErrorCode.invalid_config
    assert _incremental(broker, "", _op("listeners", "PLAINTEXT://h:1", configs.SET))["error_code"] == \
        ErrorCode.invalid_config
    assert _incremental(broker, "3", _op(RATE, None, configs.SET))["error_code"] == ErrorCode.invalid_request
    assert _incremental(broker, "3", _op(RATE, "5", configs.SET), validate_only=True)["error_code"] == ErrorCode.none
    assert broker.stored == {}


def test_legacy_alter_configs_replaces_the_brokers_dynamic_configs():
    broker = FakeBroker()
    broker.stored["3"] = {"follower.replication.throttled.rate": "1"}
    resource = SimpleNamespace(resource_type=configs.BROKER, resource_name="3",
                               configs=[SimpleNamespace(name=RATE, value="9")])
    answer = _run(configs.alter_configs, broker, resources=[resource], validate_only=False)["responses"][0]
    assert answer["error_code"] == ErrorCode.none and broker.stored["3"] == {RATE: "9"}


def test_incremental_append_and_subtract_on_a_list_start_from_its_default():
    broker = FakeBroker()
    policy = "log.cleanup.policy"
    assert _incremental(broker, "", _op(policy, "compact", configs.APPEND))["error_code"] == ErrorCode.none
    assert broker.stored["<default>"] == {policy: "delete,compact"}
    assert _incremental(broker, "", _op(policy, "delete", configs.SUBTRACT))["error_code"] == ErrorCode.none
    assert broker.stored["<default>"] == {policy: "compact"} and broker.config.get(policy) == ["compact"]
    answer = _incremental(broker, "3", _op("log.retention.ms", "5", configs.APPEND))
    assert answer["error_code"] == ErrorCode.invalid_config
    assert answer["error_message"] == "Config value append is not allowed for config key: log.retention.ms"


def test_the_default_resource_describes_only_what_is_set_there():
    broker = FakeBroker()
    assert _describe(broker, "") == {}
    _incremental(broker, "", _op("log.retention.ms", "60000", configs.SET))
    described = _describe(broker, "")
    assert list(described) == ["log.retention.ms"]
    assert described["log.retention.ms"]["config_source"] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG


def _single_node(tmp_path, node_id=3):
    from kbroker.broker import Broker

    broker = Broker(BrokerConfig.from_dict({"log.dirs": str(tmp_path), "node.id": str(node_id)}),
                    ("127.0.0.1", 9092))
    broker.startup()
    return broker


def test_the_single_node_applies_and_keeps_its_dynamic_configs(tmp_path):
    broker = _single_node(tmp_path)
    trio.run(broker.create_topic, "plain")
    trio.run(lambda: broker.create_topic("overridden", configs={"retention.ms": "123"}))
    assert _incremental(broker, "", _op("log.retention.ms", "60000", configs.SET),
                        _op("message.max.bytes", "5000", configs.SET))["error_code"] == ErrorCode.none
    assert _incremental(broker, "3", _op("log.segment.bytes", "100000", configs.SET),
                        validate_only=True)["error_code"] == ErrorCode.none
    assert _incremental(broker, "3", _op("message.max.bytes", "4000", configs.SET))["error_code"] == ErrorCode.none

    def log_config(topic):
        return broker.replica_manager.partitions[next(tp for tp in broker.replica_manager.partitions
                                                      if tp.topic == topic)].log.config

    assert (log_config("plain").retention_ms, log_config("plain").max_message_bytes) == (60000, 4000)
    assert log_config("plain").segment_bytes == 1073741824  # validate_only changed nothing
    assert log_config("overridden").retention_ms == 123  # a topic override wins over any broker default
    described = _describe(broker)
    assert described["message.max.bytes"]["config_source"] == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert described["log.retention.ms"]["config_source"] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    broker.shutdown()

    again = _single_node(tmp_path)  # a restart: the stored configs apply before any log is used
    assert again.config.get("log.retention.ms") == 60000 and again.config.get("message.max.bytes") == 4000
    partition = next(p for tp, p in again.replica_manager.partitions.items() if tp.topic == "plain")
    assert partition.log.config.retention_ms == 60000
    again.shutdown()


def test_append_to_a_key_of_an_unknown_resource_type_is_an_error_not_a_crash():
    """Found by the dispatch fuzz test: APPEND/SUBTRACT where no config definition exists."""
    broker = FakeBroker()
    for operation in (configs.APPEND, configs.SUBTRACT):
        resource = SimpleNamespace(resource_type=8, resource_name="x", configs=[_op("some.key", "a", operation)])
        answer = _run(configs.incremental_alter_configs, broker, resources=[resource],
                      validate_only=False)["responses"][0]
        assert answer["error_code"] != ErrorCode.none


def test_a_custom_broker_key_is_stored_and_shown_back_as_kafka_does():
    """Kafka 3.8/3.9 stores a key it does not define (a Node.js client setting cleanup.policy on a
    broker gets OK) and DescribeConfigs shows it: sensitive, so without its value."""
    broker = FakeBroker()
    assert _incremental(broker, "3", _op("cleanup.policy", "compact", configs.SET),
                        _op(RATE, "77", configs.SET))["error_code"] == ErrorCode.none
    assert broker.stored["3"] == {"cleanup.policy": "compact", RATE: "77"}
    shown = _describe(broker)["cleanup.policy"]
    assert (shown["value"], shown["is_sensitive"], shown["read_only"], shown["config_source"], shown["config_type"]) \
        == (None, True, True, ConfigSource.DYNAMIC_BROKER_CONFIG, 0)
    assert _incremental(broker, "3", _op("cleanup.policy", None, configs.DELETE))["error_code"] == ErrorCode.none
    assert broker.stored["3"] == {RATE: "77"} and "cleanup.policy" not in _describe(broker)
    resource = SimpleNamespace(resource_type=configs.BROKER, resource_name="",
                               configs=[SimpleNamespace(name="team.owner", value="payments")])
    answer = _run(configs.alter_configs, broker, resources=[resource], validate_only=False)["responses"][0]
    assert answer["error_code"] == ErrorCode.none and broker.stored["<default>"] == {"team.owner": "payments"}
    assert list(_describe(broker, "")) == ["team.owner"]
