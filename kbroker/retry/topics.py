"""Retry and dead-letter topics, the broker's side: the tiers and the dead-letter topic a main
topic's `retry.topics` asks for are created with its partition count and replication factor
(CreateTopics, AlterConfigs), and a produce to a tier finds its route (`route_for`).

Tiers taken out of `retry.topics` keep their topics and their `retry.delay.ms`, so a consumer on
an older list still gets its records back; deleting such a topic (or its `retry.delay.ms`) retires
it. Deleting the main topic leaves its tiers and dead-letter topic.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from kbroker.errors import InvalidConfigError, KafkaError, TopicAlreadyExistsError
from kbroker.metadata.store import validate_topic_name
from kbroker.retry.tiers import (
    MAX_DELIVERY_ATTEMPTS,
    RETRY_DELAY_MS,
    RETRY_TARGET,
    RETRY_TOPICS,
    TARGET_RETRY_TOPIC,
    RetryRecordError,
    TierRoute,
    dlq_topic,
    effective_max_attempts,
    main_topic_of,
    parse_tiers,
    retry_topic,
)

logger = logging.getLogger(__name__)

CreateTopic = Callable[..., Awaitable[object]]  # Broker.create_topic


def _tiers(configs: Mapping[str, str]) -> list[tuple[str, int]]:
    return parse_tiers(configs.get(RETRY_TOPICS))  # validated when it was set


def check_retry_configs(metadata, name: str, configs: Mapping[str, str]) -> None:
    """The rules that need the topic's name and the cluster's topics (InvalidConfigError): a tier is
    named `<main>.retry.<tier>`; the tiers' and dead-letter topic's names are legal and an existing
    topic of a tier's name is a tier."""
    if int(configs.get(RETRY_DELAY_MS, 0) or 0) > 0 and main_topic_of(name) is None:
        raise InvalidConfigError(f"{RETRY_DELAY_MS} makes a topic a retry tier, whose name must be "
                                 f"<main topic>.retry.<tier>; {name!r} is not")
    tiers = _tiers(configs)
    if not tiers:
        return
    wanted = [(retry_topic(name, tier), True) for tier, _delay in tiers] + [(dlq_topic(name), False)]
    for topic, must_be_tier in wanted:
        try:
            validate_topic_name(topic)
        except KafkaError as exc:
            raise InvalidConfigError(f"{RETRY_TOPICS}: cannot create {topic!r}: {exc}") from None
        existing = metadata.topic(topic)
        if must_be_tier and existing is not None and int(existing.configs.get(RETRY_DELAY_MS, 0) or 0) <= 0:
            raise InvalidConfigError(f"{RETRY_TOPICS}: the topic {topic} exists and is not a retry tier "
                                     f"(no {RETRY_DELAY_MS}); delete it or choose another tier")


async def create_retry_topics(create_topic: CreateTopic, metadata, name: str, configs: Mapping[str, str],
                              partitions: int, replication_factor: int, wait_s: float) -> list[str]:
    """Create the tiers and the dead-letter topic `configs` ask for and do not exist yet; their names."""
    tiers = _tiers(configs)
    if not tiers:
        return []
    wanted = [(retry_topic(name, tier), {RETRY_DELAY_MS: str(delay)}) for tier, delay in tiers]
    wanted.append((dlq_topic(name), {}))
    created = []
    for topic, topic_configs in wanted:
        if metadata.topic(topic) is not None:
            continue
        try:
            await create_topic(topic, num_partitions=partitions, replication_factor=replication_factor,
                               configs=topic_configs, wait_s=wait_s)
        except TopicAlreadyExistsError:
            continue  # another broker's request created it first
        created.append(topic)
    if created:
        logger.info("created the retry topics of %s: %s", name, ", ".join(created))
    return created


def route_for(metadata, topic: str, partition: int) -> TierRoute | None:
    """The route of a produce to a retry tier; None for any other topic (one dict lookup).
    RetryRecordError when the tier's main topic is gone."""
    info = metadata.topic(topic)
    if info is None or RETRY_DELAY_MS not in info.configs:
        return None
    delay = int(info.configs[RETRY_DELAY_MS])
    if delay <= 0:
        return None
    main = main_topic_of(topic)
    main_info = metadata.topic(main) if main else None
    if main_info is None:
        raise RetryRecordError(f"{topic} is a retry tier but its main topic {main} does not exist")
    max_attempts = effective_max_attempts(int(main_info.configs.get(MAX_DELIVERY_ATTEMPTS, -1)),
                                          len(_tiers(main_info.configs)))
    dlq = metadata.topic(dlq_topic(main))
    into_tier = info.configs.get(RETRY_TARGET, "").lower() == TARGET_RETRY_TOPIC
    return TierRoute(topic, partition, delay, into_tier, main, main_info.num_partitions, max_attempts,
                     None if dlq is None else dlq.num_partitions)
