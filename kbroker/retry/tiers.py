"""Retry and dead-letter topics, pure: the configuration's rules, the topics' names, and what
becomes of a record a consumer produces to a retry tier (docs/features.md, "Retry and
dead-letter topics").

A main topic's `retry.topics` (e.g. `30s,5m,1h`) names its tiers; each is a topic
`<main>.retry.<tier>` marked by `retry.delay.ms`, and `<main>.dlq` takes what is given up on.
A record produced to a tier comes back after the tier's delay — to the main topic's partition of
the same index, or into the tier itself with `retry.target=retry-topic` — with `retry.count` one
higher than the record carried (1 on the first retry) and `retry.topic` naming the tier. Once
that count reaches the main topic's `max.delivery.attempts` (default: the number of tiers + 1; the
first delivery is attempt 1) the record goes to the dead-letter topic at once instead, with
`dlq.reason`, `dlq.source.topic` and `dlq.source.partition`; its `retry.count` is the retries it
had. Every other header passes through (a consumer's `error`, `original.*`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RETRY_TOPICS = "retry.topics"  # on a main topic: its tiers
MAX_DELIVERY_ATTEMPTS = "max.delivery.attempts"  # on a main topic; -1: the number of tiers + 1
RETRY_DELAY_MS = "retry.delay.ms"  # on a tier: its delay (> 0 makes a topic a retry tier)
RETRY_TARGET = "retry.target"  # on a tier: main (default) or retry-topic
TARGET_MAIN, TARGET_RETRY_TOPIC = "main", "retry-topic"
MAX_TIERS = 10

RETRY_COUNT_HEADER = "retry.count"
RETRY_TOPIC_HEADER = "retry.topic"
DLQ_REASON_HEADER = "dlq.reason"
DLQ_SOURCE_TOPIC_HEADER = "dlq.source.topic"
DLQ_SOURCE_PARTITION_HEADER = "dlq.source.partition"
SET_BY_BROKER = frozenset({RETRY_COUNT_HEADER, RETRY_TOPIC_HEADER, DLQ_REASON_HEADER, DLQ_SOURCE_TOPIC_HEADER,
                           DLQ_SOURCE_PARTITION_HEADER})

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"([1-9][0-9]{0,9})(ms|s|m|h|d)")
_TIER_INFIX = ".retry."

Header = tuple[str, bytes | None]
Target = tuple[str, int]


class RetryRecordError(ValueError):
    """A record a retry tier cannot take (answered INVALID_RECORD)."""


# -- configuration ------------------------------------------------------------------------------

def parse_duration(text: str) -> int:
    """`250ms`, `30s`, `5m`, `1h`, `2d` → milliseconds; ValueError otherwise."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a duration (a positive whole number with a unit ms, s, m, h or d, "
                         "such as 30s)")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def parse_tiers(items: list[str] | str | None, max_delay_ms: int | None = None) -> list[tuple[str, int]]:
    """`retry.topics` → [(tier name, delay ms)] in the configured order; ValueError with the reason."""
    if isinstance(items, str):
        items = items.split(",")
    names = [item.strip() for item in items or [] if item.strip()]
    if len(names) > MAX_TIERS:
        raise ValueError(f"at most {MAX_TIERS} retry tiers, got {len(names)}")
    tiers = []
    for name in names:
        delay = parse_duration(name)
        if max_delay_ms is not None and delay > max_delay_ms:
            raise ValueError(f"the tier {name} ({delay} ms) is longer than delayed.delivery.max.delay.ms "
                             f"({max_delay_ms} ms)")
        if any(name == seen for seen, _ in tiers):
            raise ValueError(f"the tier {name} is listed twice")
        tiers.append((name, delay))
    return tiers


def effective_max_attempts(configured: int, tier_count: int) -> int:
    return tier_count + 1 if configured < 0 else configured


def retry_topic(main: str, tier: str) -> str:
    return f"{main}{_TIER_INFIX}{tier}"


def dlq_topic(main: str) -> str:
    return f"{main}.dlq"


def main_topic_of(tier_topic: str) -> str | None:
    """The main topic a tier's name belongs to (`orders.retry.30s` → `orders`)."""
    main, sep, _tier = tier_topic.rpartition(_TIER_INFIX)
    return main if sep and main else None


# -- records ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TierRoute:
    """What a produce to one partition of a retry tier needs to know, read from the metadata."""

    tier_topic: str
    partition: int  # of the tier, produced to
    delay_ms: int
    into_tier: bool  # retry.target=retry-topic
    main_topic: str
    main_partitions: int
    max_attempts: int
    dlq_partitions: int | None  # None: the dead-letter topic does not exist


@dataclass(frozen=True, slots=True)
class Planned:
    target: Target
    due_ms: int
    headers: tuple[Header, ...]


def retry_count(headers) -> int:
    """The `retry.count` a record carries (the last one; 0 without)."""
    raw = None
    for name, value in headers:
        if name == RETRY_COUNT_HEADER:
            raw = value
    if raw is None:
        return 0
    try:
        count = int(raw.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise RetryRecordError(f"header {RETRY_COUNT_HEADER} must be a decimal integer, got {raw!r:.40}") from None
    if count < 0:
        raise RetryRecordError(f"header {RETRY_COUNT_HEADER} must not be negative, got {count}")
    return count


def plan_record(route: TierRoute, headers, now_ms: int) -> Planned:
    """Where a record produced to the tier goes, when, and with which headers."""
    count = retry_count(headers)
    kept = tuple(h for h in headers if h[0] not in SET_BY_BROKER)
    if count + 1 >= route.max_attempts:
        if route.dlq_partitions is None:
            raise RetryRecordError(f"the dead-letter topic {dlq_topic(route.main_topic)} does not exist")
        return Planned((dlq_topic(route.main_topic), route.partition % route.dlq_partitions), now_ms, kept + (
            (RETRY_COUNT_HEADER, str(count).encode()),
            (DLQ_REASON_HEADER, f"{MAX_DELIVERY_ATTEMPTS} {route.max_attempts} exceeded".encode()),
            (DLQ_SOURCE_TOPIC_HEADER, route.tier_topic.encode()),
            (DLQ_SOURCE_PARTITION_HEADER, str(route.partition).encode())))
    target = (route.tier_topic, route.partition) if route.into_tier \
        else (route.main_topic, route.partition % route.main_partitions)
    return Planned(target, now_ms + route.delay_ms, kept + (
        (RETRY_COUNT_HEADER, str(count + 1).encode()), (RETRY_TOPIC_HEADER, route.tier_topic.encode())))
