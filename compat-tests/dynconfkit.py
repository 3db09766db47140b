"""Dynamic broker config scenarios' shared parts: DescribeConfigs and IncrementalAlterConfigs
through each admin client family (Java kafka-clients 3.9 through the harness, confluent-kafka,
kafka-python), answers brought to one shape, so test_dynamic_configs.py is written once and
parametrized over the families.

Neither confluent-kafka's nor kafka-python's admin client can name the cluster-wide default
broker resource (an empty name: "Invalid ConfigResource", "Broker resource names must be an
integer"), so `DEFAULT_RESOURCE[family]` says which broker resource a scenario's "cluster default"
step alters with it: the empty name with Java's, broker 0 with the others (the cluster test alters
the default with `kbroker configs`).

Every call has a deadline.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

FAMILIES = ("java", "confluent", "kafka-python")
DEFAULT_RESOURCE = {"java": "", "confluent": "0", "kafka-python": "0"}
TIMEOUT_S = 30
_JAVA_ERRORS = {"InvalidConfigurationException": 40, "InvalidRequestException": 42,
                "UnknownTopicOrPartitionException": 3}


def as_shown(family: str, synonyms: list[tuple[str, str | None, str]]) -> tuple[tuple[str, str | None, str], ...]:
    """What a family can show of a config's synonyms: confluent-kafka keeps them in a dict keyed by
    name, so of several synonyms with one name (a broker's, the default's) it shows the last."""
    if family != "confluent":
        return tuple(synonyms)
    last = {name: (name, value, source) for name, value, source in synonyms}
    return tuple(last.values())


class Described(NamedTuple):
    value: str | None
    source: str  # Kafka's ConfigSource name, e.g. DYNAMIC_DEFAULT_BROKER_CONFIG
    read_only: bool
    synonyms: tuple[tuple[str, str | None, str], ...]


class Admin:
    """One family's admin calls against `bootstrap`."""

    def __init__(self, family: str, bootstrap: str, kt: Any, java_harness: Any = None) -> None:
        self.family, self.bootstrap, self.java = family, bootstrap, java_harness
        if family == "confluent":
            kt.require_module("confluent_kafka")
        elif family == "kafka-python":
            kt.require_module("kafka")

    def describe(self, resource_type: str, name: str) -> dict[str, Described]:
        """Every config of a broker ("" = the cluster-wide default) or topic, with synonyms."""
        return getattr(self, f"_describe_{self.family.replace('-', '_')}")(resource_type, name)

    def alter(self, resource_type: str, name: str, ops: list[tuple[str, str, str | None]],
              validate_only: bool = False) -> int:
        """IncrementalAlterConfigs of (op, key, value) with op in set/delete/append/subtract; the
        resource's error code (0: done)."""
        return getattr(self, f"_alter_{self.family.replace('-', '_')}")(resource_type, name, ops, validate_only)

    # -- Java kafka-clients ---------------------------------------------------------------------
    def _describe_java(self, resource_type: str, name: str) -> dict[str, Described]:
        out = {}
        for line in self.java.ok("admin", self.bootstrap, "describe-configs", resource_type, name or "-", timeout=90):
            if line.startswith("{"):
                c = json.loads(line)
                out[c["name"]] = Described(c["value"], c["source"], c["readOnly"],
                                           tuple(tuple(s) for s in c["synonyms"]))
        return out

    def _alter_java(self, resource_type: str, name: str, ops, validate_only: bool) -> int:
        args = [f"{op}:{key}" + ("" if value is None else f"={value}") for op, key, value in ops]
        lines = self.java.ok("admin", self.bootstrap, "alter-configs", resource_type, name or "-",
                             "validate" if validate_only else "apply", *args, timeout=90)
        answer = json.loads(next(line for line in lines if line.startswith("{")))
        return 0 if answer["result"] == "ok" else _JAVA_ERRORS.get(answer["result"], -1)

    # -- confluent-kafka (librdkafka) -------------------------------------------------------------
    def _resource(self, resource_type: str, name: str, **kw: Any):
        from confluent_kafka.admin import ConfigResource

        return ConfigResource(ConfigResource.Type.BROKER if resource_type == "broker" else ConfigResource.Type.TOPIC,
                              name, **kw)

    def _describe_confluent(self, resource_type: str, name: str) -> dict[str, Described]:
        from confluent_kafka.admin import AdminClient, ConfigSource

        resource = self._resource(resource_type, name)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})  # alive until the answer comes
        entries = admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
        source = lambda s: ConfigSource(s).name  # noqa: E731
        return {n: Described(e.value, source(e.source), e.is_read_only,
                             tuple((s.name, s.value, source(s.source)) for s in e.synonyms.values()))
                for n, e in entries.items()}

    def _alter_confluent(self, resource_type: str, name: str, ops, validate_only: bool) -> int:
        import confluent_kafka as ck
        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry

        resource = self._resource(resource_type, name, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType[op.upper()]) for op, key, value in ops])
        admin = AdminClient({"bootstrap.servers": self.bootstrap})  # alive until the answer comes
        try:
            admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S,
                                            validate_only=validate_only)[resource].result(TIMEOUT_S)
        except ck.KafkaException as exc:
            return exc.args[0].code()
        return 0

    # -- kafka-python --------------------------------------------------------------------------------
    def _kafka_python(self):
        import kafka

        return kafka.KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)

    def _describe_kafka_python(self, resource_type: str, name: str) -> dict[str, Described]:
        from kafka.admin import ConfigResource, ConfigResourceType

        admin = self._kafka_python()
        try:
            kind = ConfigResourceType.BROKER if resource_type == "broker" else ConfigResourceType.TOPIC
            result = admin.describe_configs([ConfigResource(kind, name)], include_synonyms=True, config_filter="all")
        finally:
            admin.close()
        configs = result[resource_type][name]
        return {n: Described(c["value"], c["config_source"], c["read_only"],
                             tuple((s["name"], s["value"], s["source"]) for s in c["synonyms"]))
                for n, c in configs.items()}

    def _alter_kafka_python(self, resource_type: str, name: str, ops, validate_only: bool) -> int:
        from kafka.admin import ConfigResource, ConfigResourceType

        kind = ConfigResourceType.BROKER if resource_type == "broker" else ConfigResourceType.TOPIC
        admin = self._kafka_python()
        try:
            result = admin.alter_configs([ConfigResource(kind, name, configs={k: (op.upper(), v) for op, k, v in ops})],
                                         validate_only=validate_only, raise_on_unknown=False, incremental=True)
        finally:
            admin.close()
        answer = str(result[resource_type][name])  # "OK" or "[Error 40] ..."
        code = re.match(r"\[Error (-?\d+)\]", answer)
        return 0 if answer == "OK" else int(code.group(1)) if code else -1
