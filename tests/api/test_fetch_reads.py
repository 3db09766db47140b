"""An incremental session's watch (api/fetch_reads.py): which of the session's partitions a
request reads — all of them the first time and every FULL_PASS_S, else only those the request
lists, those the replica manager marked changed, and those whose last read had news."""

from __future__ import annotations

import uuid

from kbroker.api.fetch_reads import FULL_PASS_S, SessionWatch
from kbroker.fetch_session import CachedPartition, PartitionRequest, TopicIdPartition
from kbroker.log.topic_partition import TopicPartition

ZERO = uuid.UUID(int=0)


def session(n: int):
    entries = [CachedPartition(TopicIdPartition(ZERO, "t", p), PartitionRequest(0, 100)) for p in range(n)]
    by_source = {TopicPartition("t", e.tip.partition): [e] for e in entries}
    watch = SessionWatch(frozenset(), list(by_source), by_source, frozenset())
    return entries, {e.tip.key: e for e in entries}, watch


def parts(chosen) -> list[int]:
    return sorted(e.tip.partition for e in chosen)


def test_first_all_then_only_what_changed():
    entries, partitions, watch = session(8)
    assert parts(watch.select(entries, partitions, [], now=0.0)) == list(range(8))
    for e in entries:
        e.memo = ("nothing new",)
        watch.settled(e)
    assert watch.select(entries, partitions, [], now=1.0) == []
    watch.changed(TopicPartition("t", 3))
    assert watch.event.is_set()
    assert parts(watch.select(entries, partitions, [], now=1.1)) == [3]
    assert not watch.event.is_set()  # a new event for the next long poll
    assert watch.select(entries, partitions, [], now=1.2) == []  # dirty is consumed
    assert parts(watch.select(entries, partitions, [entries[5].tip.key], now=1.3)) == [5]  # listed
    entries[6].memo = None  # its last read had news: read until it settles
    watch.settled(entries[6])
    assert parts(watch.select(entries, partitions, [], now=1.4)) == [6]
    assert parts(watch.select(entries, partitions, [], now=1.5)) == [6]
    entries[6].memo = ("nothing new",)
    watch.settled(entries[6])
    assert watch.select(entries, partitions, [], now=1.6) == []
    assert parts(watch.select(entries, partitions, [], now=FULL_PASS_S)) == list(range(8))  # the periodic check


def test_many_changes_are_read_in_the_sessions_order():
    entries, partitions, watch = session(8)
    watch.select(entries, partitions, [], now=0.0)
    for e in entries:
        e.memo = ("nothing new",)
    for p in (7, 1, 4):
        watch.changed(TopicPartition("t", p))
    chosen = watch.select(entries, partitions, [], now=1.0)
    assert [e.tip.partition for e in chosen] == [1, 4, 7]
    watch.changed(TopicPartition("other", 0))  # not in the session
    assert watch.select(entries, partitions, [], now=1.1) == []
