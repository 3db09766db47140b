"""Retry and dead-letter topics' scenarios' shared parts: the admin calls they make, one adapter
per client family (confluent-kafka/librdkafka and kafka-python), so test_retry.py is written once
and parametrized over the families. Producing and reading are delayedkit's.

Every call has a deadline.
"""

from __future__ import annotations

import re
import time

import delayedkit as dk

FAMILIES = dk.FAMILIES
MODULES = dk.MODULES
TIMEOUT_S = 30


def create_topic(family: str, bootstrap: str, topic: str, partitions: int, configs: dict[str, str]) -> str | None:
    """None when created; else "<Kafka error code> <message>"."""
    if family == "confluent":
        import confluent_kafka as ck
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        future = admin.create_topics([NewTopic(topic, partitions, 1, config=configs)],
                                     operation_timeout=TIMEOUT_S)[topic]
        try:
            future.result(TIMEOUT_S)
        except ck.KafkaException as exc:
            return f"{exc.args[0].code()} {exc.args[0].str()}"
        return None
    import kafka
    from kafka.admin import NewTopic

    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
    except kafka.errors.KafkaError as exc:
        return f"{exc.errno} {exc}"
    finally:
        admin.close()
    return None


def alter_topic(family: str, bootstrap: str, topic: str, configs: dict[str, str]) -> str | None:
    """Set `configs` on the topic (confluent: IncrementalAlterConfigs, kafka-python: AlterConfigs,
    which replaces every override); None when done, else "<Kafka error code> <message>"."""
    if family == "confluent":
        import confluent_kafka as ck
        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

        admin = AdminClient({"bootstrap.servers": bootstrap})
        resource = ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
        try:
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(TIMEOUT_S)
        except ck.KafkaException as exc:
            return f"{exc.args[0].code()} {exc.args[0].str()}"
        return None
    import kafka
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)],
                                     raise_on_unknown=False, incremental=False)
    except kafka.errors.KafkaError as exc:
        return f"{exc.errno} {exc}"
    finally:
        admin.close()
    answers = [str(r) for by_name in result.values() for r in by_name.values()]  # "OK" or "[Error 40] ..."
    if answers == ["OK"]:
        return None
    code = re.match(r"\[Error (-?\d+)\]", answers[0])
    return f"{code.group(1) if code else -1} {'; '.join(answers)}"


def partition_counts(family: str, bootstrap: str, topics: list[str]) -> dict[str, int]:
    """The partition count of each of `topics` that exists (metadata, no auto-creation)."""
    if family == "confluent":
        from confluent_kafka.admin import AdminClient

        known = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=TIMEOUT_S).topics
        return {t: len(known[t].partitions) for t in topics if t in known}
    import kafka

    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        known = {t["name"]: t for t in admin.describe_topics() if not t.get("error_code")}
    finally:
        admin.close()
    return {t: len(known[t]["partitions"]) for t in topics if t in known}


def wait_for_counts(family: str, bootstrap: str, expected: dict[str, int], timeout: float = 10) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        got = partition_counts(family, bootstrap, list(expected))
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.2)
