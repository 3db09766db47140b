"""DescribeConfigs / AlterConfigs / IncrementalAlterConfigs of broker resources: the replication
throttle rates are dynamic (this broker's id, or the empty name for the cluster-wide default),
static keys are refused as Kafka refuses them, and the topic throttle lists are topic configs."""

from types import SimpleNamespace

import trio

from kbroker.api import configs
from kbroker.config import BrokerConfig, ConfigSource
from kbroker.errors import ErrorCode

RATE = "leader.replication.throttled.rate"


class FakeBroker:
    """What the handlers use of a cluster broker, with its dynamic configs in a dict (ZooKeeper's part)."""

    node_id = 3

    def __init__(self) -> None:
        self.config = BrokerConfig.from_dict({"num.partitions": "4"})
        self.stored: dict[str, dict[str, str]] = {}
        self.metadata = SimpleNamespace(topic=lambda name: None)

    def dynamic_broker_configs(self):
        return dict(self.stored.get("3", {})), dict(self.stored.get("<default>", {}))

    async def broker_configs(self, entity):
        return dict(self.stored.get(entity, {}))

    async def set_broker_configs(self, entity, new):
        self.stored[entity] = dict(new)


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
    assert (_describe(broker)[RATE]["value"], _describe(broker)[RATE]["config_source"]) == (
        "500", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    broker.stored["3"] = {RATE: "700"}
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
    # deleting, also a key kbroker does not know (Kafka's tool clears replica.alter.log.dirs.io.max.bytes.per.second)
    answer = _incremental(broker, "3", _op(RATE, None, configs.DELETE),
                          _op("replica.alter.log.dirs.io.max.bytes.per.second", None, configs.DELETE))
    assert answer["error_code"] == ErrorCode.none and broker.stored["3"] == {"follower.replication.throttled.rate": "2000000"}


def test_the_empty_name_is_the_cluster_wide_default():
    broker = FakeBroker()
    assert _incremental(broker, "", _op(RATE, "5", configs.SET))["error_code"] == ErrorCode.none
    assert broker.stored == {"<default>": {RATE: "5"}}


def test_refusals():
    broker = FakeBroker()
    assert _incremental(broker, "4", _op(RATE, "5", configs.SET))["error_code"] == ErrorCode.invalid_request
    assert _incremental(broker, "3", _op("num.partitions", "5", configs.SET))["error_code"] == ErrorCode.invalid_config
    assert _incremental(broker, "3", _op("no.such.key", "5", configs.SET))["error_code"] == ErrorCode.invalid_config
    assert _incremental(broker, "3", _op(RATE, "-1", configs.SET))["error_code"] == ErrorCode.invalid_config
    assert _incremental(broker, "3", _op(RATE, "fast", configs.SET))["error_code"] == ErrorCode.invalid_config
    assert _incremental(broker, "3", _op(RATE, "5", configs.APPEND))["error_code"] == ErrorCode.invalid_config
    assert _incremental(broker, "3", _op(RATE, "5", configs.SET), validate_only=True)["error_code"] == ErrorCode.none
    assert broker.stored == {}


def test_legacy_alter_configs_replaces_the_brokers_dynamic_configs():
    broker = FakeBroker()
    broker.stored["3"] = {"follower.replication.throttled.rate": "1"}
    resource = SimpleNamespace(resource_type=configs.BROKER, resource_name="3",
                               configs=[SimpleNamespace(name=RATE, value="9")])
    answer = _run(configs.alter_configs, broker, resources=[resource], validate_only=False)["responses"][0]
    assert answer["error_code"] == ErrorCode.none and broker.stored["3"] == {RATE: "9"}


def test_the_single_node_has_no_dynamic_broker_configs(tmp_path):
    from kbroker.broker import Broker

    broker = Broker(BrokerConfig.from_dict({"log.dirs": str(tmp_path)}), ("127.0.0.1", 9092))
    broker.node_id = 3
    answer = _incremental(broker, "3", _op(RATE, "5", configs.SET))
    assert answer["error_code"] == ErrorCode.invalid_request and "cluster" in answer["error_message"]
    assert _describe(broker)[RATE]["config_source"] == ConfigSource.DEFAULT_CONFIG


def test_append_to_a_key_of_an_unknown_resource_type_is_an_error_not_a_crash():
    """Found by the dispatch fuzz test: APPEND/SUBTRACT where no config definition exists."""
    broker = FakeBroker()
    for operation in (configs.APPEND, configs.SUBTRACT):
        resource = SimpleNamespace(resource_type=8, resource_name="x", configs=[_op("some.key", "a", operation)])
        answer = _run(configs.incremental_alter_configs, broker, resources=[resource],
                      validate_only=False)["responses"][0]
        assert answer["error_code"] != ErrorCode.none
