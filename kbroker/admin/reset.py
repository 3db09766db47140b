"""Planning an offset reset, as kafka-consumer-groups.sh --reset-offsets does, without I/O: parse
what to reset (`--topic T[:P,P...]`, `--to-datetime`) and compute each partition's new offset from
answers already fetched (committed offsets, log start/end offsets, offsets for a timestamp).

Kafka's rules: --shift-by needs a committed offset; --to-datetime past the last record lands on
the log end; every new offset is clamped to [log start, log end] with a warning.
"""

from __future__ import annotations

import datetime
from typing import Mapping, NamedTuple

TopicPartition = tuple[str, int]

STRATEGIES = ("to-earliest", "to-latest", "to-datetime", "shift-by", "to-offset")


class PlanError(ValueError):
    """The reset cannot be planned (bad argument, missing committed offset)."""


class ResetSpec(NamedTuple):
    strategy: str  # one of STRATEGIES
    value: int | None = None  # shift, offset, or timestamp in ms


class PlannedOffset(NamedTuple):
    topic: str
    partition: int
    current: int | None  # the committed offset now, if any
    new: int


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """`T` (every partition) or `T:0,2,5`."""
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise PlanError(f"invalid --topic {spec!r}: no topic name")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise PlanError(f"invalid --topic {spec!r}: partitions must be integers, e.g. {topic}:0,1") from None
    if not partitions or partitions[0] < 0:
        raise PlanError(f"invalid --topic {spec!r}: expected {topic}:P[,P...] with partitions >= 0")
    return topic, partitions


def parse_datetime_ms(text: str) -> int:
    """ISO 8601 (`2024-05-01T12:00:00`, optional `.sss` and `Z` / `+02:00`) to epoch ms. Without a
    zone the local time zone applies, as in Kafka's tool."""
    try:
        when = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise PlanError(f"invalid --to-datetime {text!r}: expected ISO 8601, e.g. 2024-05-01T12:00:00.000+00:00") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as Kafka's Utils.getDateTime does
    return int(when.timestamp() * 1000)


def plan_reset(partitions: list[TopicPartition], spec: ResetSpec, committed: Mapping[TopicPartition, int],
               log_start: Mapping[TopicPartition, int | None], log_end: Mapping[TopicPartition, int | None],
               by_time: Mapping[TopicPartition, int | None] | None = None,
               ) -> tuple[list[PlannedOffset], list[str]]:
    """New offset per partition, and the warnings to show (one per clamped offset)."""
    plan: list[PlannedOffset] = []
    warnings: list[str] = []
    for tp in sorted(set(partitions)):
        start, end = log_start.get(tp), log_end.get(tp)
        if start is None or end is None:
            raise PlanError(f"no log start/end offsets for {tp[0]}-{tp[1]}")
        current = committed.get(tp)
        if spec.strategy == "to-earliest":
            wanted = start
        elif spec.strategy == "to-latest":
            wanted = end
        elif spec.strategy == "to-offset":
            wanted = _value(spec)
        elif spec.strategy == "shift-by":
            if current is None:
                raise PlanError(f"cannot shift the offset of {tp[0]}-{tp[1]}: the group has no committed offset for it")
            wanted = current + _value(spec)
        elif spec.strategy == "to-datetime":
            found = (by_time or {}).get(tp)
            wanted = end if found is None else found  # no record that recent: the log end, as Kafka
        else:
            raise PlanError(f"unknown reset strategy {spec.strategy!r}")
        new = wanted
        if wanted < start:
            new = start
            warnings.append(f"New offset ({wanted}) is lower than earliest offset for {tp[0]}-{tp[1]}. "
                            f"Value will be set to {start}")
        elif wanted > end:
            new = end
            warnings.append(f"New offset ({wanted}) is higher than latest offset for {tp[0]}-{tp[1]}. "
                            f"Value will be set to {end}")
        plan.append(PlannedOffset(tp[0], tp[1], current, new))
    return plan, warnings


def _value(spec: ResetSpec) -> int:
    if spec.value is None:
        raise PlanError(f"--{spec.strategy} needs a value")
    return spec.value
