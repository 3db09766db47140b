"""Partition decrease, the command side: `kbroker topics alter T --partitions N` with N below the
current count (rules in docs/cluster.md, "Decreasing partitions").

1. One IncrementalAlterConfigs of the topic: `partitions.retire.from=N`, kbroker's own operation
   (CreatePartitions with a lower count is INVALID_PARTITIONS, as in Kafka), with `--partitioner`
   also `retired.records.partitioner` (where retired keyed records go: the producers' default
   partitioner for N partitions), which the broker sets first. The controller marks partitions
   N.. as retired, every broker stops advertising them, and the leader of each starts its drain
   (`replica/drain.py`), which copies what no group has read yet into the partitions that remain
   and keeps copying what stale producers still send there.
3. The command waits until every broker it can reach lists N partitions and each drain has caught
   up with the end its partition had then (its progress is the group `kbroker-retire-<topic>`),
   and reports.

Metadata no longer names the retired partitions' leaders: every broker is asked (ListOffsets),
and the one that leads answers.
"""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode

from kbroker.admin.client import LATEST, AdminClient, AdminError, Broker
from kbroker.config_defs import PARTITIONS_RETIRE_FROM
from kbroker.partitioners import PARTITIONERS
from kbroker.replica.drain import drain_group

__all__ = ["PARTITIONERS", "decrease", "drain_group"]

LIST_OFFSETS, LIST_OFFSETS_VERSION = 2, 7


def decrease(admin: AdminClient, topic: str, count: int, *, partitioner: str | None = None,
             wait_s: float = 600.0, progress=lambda _line: None) -> dict[int, int]:
    """Retire partitions `count`.. of `topic`; returns each retired partition's drained-to offset."""
    brokers, topics = admin.describe_topics([topic])
    current = len(topics[0].partitions)
    if count > current:
        raise AdminError(f"{topic} has {current} partitions; {count} is not a decrease")
    if count < current:  # the explicit decrease, with where retired keyed records go
        admin.alter_topic_configs(topic, {**({"retired.records.partitioner": partitioner} if partitioner else {}),
                                          PARTITIONS_RETIRE_FROM: str(count)}, [])
    elif partitioner is not None:  # run again: the partitioner may still change
        admin.alter_topic_configs(topic, {"retired.records.partitioner": partitioner}, [])
    deadline = time.monotonic() + wait_s
    _wait_everyone_lists(brokers, topic, count, admin.timeout, deadline, admin.security)
    ends = {}
    r, limit = count, (current if count < current else None)  # run again: as many as some broker hosts
    while limit is None or r < limit:
        found = _leader_and_end(admin, brokers, topic, r, deadline)
        if found is None:
            if limit is not None:
                raise AdminError(f"no broker hosts {topic}-{r}")
            break
        ends[r] = found[1]
        r += 1
    if not ends:  # nothing retired: the broker says what it says of an unchanged count
        admin.create_partitions(topic, count)
        return {}
    done: dict[int, int] = {}
    while len(done) < len(ends):
        committed = admin.committed_offsets(drain_group(topic))
        for r, end in ends.items():
            at = committed.get((topic, r))
            if r not in done and at is not None and at >= end:
                done[r] = at
                progress(f"  {topic}-{r}: drained up to offset {at} into partitions 0..{count - 1}")
        if len(done) < len(ends):
            if time.monotonic() > deadline:
                left = sorted(set(ends) - set(done))
                raise AdminError(f"the drains of partitions {left} have not caught up yet; they go on "
                                 f"(run the command again to wait for them)")
            time.sleep(0.5)
    return done


def _wait_everyone_lists(brokers: dict[int, Broker], topic: str, count: int, timeout: float, deadline: float,
                         security: Any = None) -> None:
    pending = dict(brokers)
    while pending:
        for broker_id, b in list(pending.items()):
            try:
                with AdminClient(f"{b.host}:{b.port}", timeout=timeout, security=security) as one:
                    if len(one.partitions_of(topic)) == count:
                        pending.pop(broker_id)
            except (AdminError, OSError):
                # a broker that is down is not waited for: it learns the count from the full
                # UpdateMetadata the controller sends it when it comes back
                pending.pop(broker_id)
        if pending:
            if time.monotonic() > deadline:
                raise AdminError(f"brokers {sorted(pending)} still list more than {count} partitions of {topic}")
            time.sleep(0.2)


def _leader_and_end(admin: AdminClient, brokers: dict[int, Broker], topic: str, partition: int,
                    deadline: float) -> tuple[Broker, int] | None:
    """(leader, log end) of a partition Metadata does not name; None when no broker hosts it."""
    while True:
        hosted = False
        for b in brokers.values():
            try:
                body = admin.connection(b.host, b.port).call(LIST_OFFSETS, {
                    "replica_id": -1, "isolation_level": 0, "timeout": int(admin.timeout * 1000),
                    "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                               "timestamp": LATEST}]}]}, LIST_OFFSETS_VERSION)
            except (AdminError, OSError):
                hosted = True  # an unreachable broker may be the one that hosts it
                continue
            p = body.topics[0].partitions[0]
            if p.error_code == ErrorCode.none:
                return b, int(p.offset)
            hosted = hosted or p.error_code != ErrorCode.unknown_topic_or_partition
        if not hosted:
            return None
        if time.monotonic() > deadline:
            raise AdminError(f"no broker leads {topic}-{partition}")
        time.sleep(0.2)
