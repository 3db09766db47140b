"""TxnOffsetCommit v0-v4 and OffsetFetch's require_stable through the dispatch table, on a real
single-node broker: the offsets go to `__consumer_offsets` as the producer's transactional batch,
pend until a COMMIT marker is written there (the marker path calls `complete_transaction`), are
dropped by an ABORT, survive a restart as pending, and the request errors are Kafka's."""

import functools

import pytest
import trio
from brokerkit import ask, running, start

from kbroker.api.dispatch import DISPATCH
from kbroker.errors import ErrorCode as E
from kbroker.group.offsets_log import OFFSETS_TOPIC
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.control import (
    ABORT,
    COMMIT,
    EndTransactionMarker,
    build_end_txn_marker_batch,
)
from kbroker.wire.internal_records import iter_internal_batches
from kbroker.wire.records import validate_batches

TXN_OFFSET_COMMIT, OFFSET_FETCH, OFFSET_COMMIT = 28, 9, 8
PRODUCER_ID = 4000




@pytest.fixture
def broker(tmp_path):
    yield from running(tmp_path, 2)




def txn_commit(broker, version=4, group="g", offsets=None, epoch=0, **fields):
    offsets = {("t", 0): 10} if offsets is None else offsets
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_leader_epoch": 1, "committed_metadata": f"m{offset}"})
    body = ask(broker, TXN_OFFSET_COMMIT, version, {
        "transactional_id": "tx", "group_id": group, "producer_id": PRODUCER_ID, "producer_epoch": epoch,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()], **fields})
    return {(t.name, p.partition_index): p.error_code for t in body.topics for p in t.partitions}


def fetch(broker, version=7, group="g", partitions=(0, 1), require_stable=False):
    """{partition of t: (offset, error)} as OffsetFetch answers it."""
    topics = [{"name": "t", "partition_indexes": list(partitions)}]
    if version >= 8:
        body = ask(broker, OFFSET_FETCH, version, {"groups": [{"group_id": group, "topics": topics}],
                                                   "require_stable": require_stable})
        [answer] = body.groups
    else:
        answer = ask(broker, OFFSET_FETCH, version, {"group_id": group, "topics": topics,
                                                     "require_stable": require_stable})
    assert answer.error_code == E.none
    return {p.partition_index: (p.committed_offset, p.error_code) for t in answer.topics for p in t.partitions}


def end_txn(broker, commit: bool, group="g", epoch=0):
    """What WriteTxnMarkers will do: the marker is appended to the group's offsets partition as a
    coordinator's append, then the group coordinator is told."""
    partition = broker.group_coordinator.partition_for(group)
    leader = broker.replica_manager.get_leader_partition(TopicPartition(OFFSETS_TOPIC, partition))
    marker = EndTransactionMarker(COMMIT if commit else ABORT, 0)
    buf = bytearray(build_end_txn_marker_batch(marker, producer_id=PRODUCER_ID, producer_epoch=epoch,
                                               timestamp=1000))
    leader.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1, from_client=False)
    broker.group_coordinator.complete_transaction(partition, PRODUCER_ID, commit)


def test_served_v0_to_v4():
    spec = DISPATCH[TXN_OFFSET_COMMIT]
    assert (spec.name, spec.min_version, spec.max_version, spec.cluster_only) == ("TxnOffsetCommit", 0, 4, False)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offsets_are_seen_once_the_transaction_commits(broker, version):
    assert txn_commit(broker, version, offsets={("t", 0): 10, ("t", 1): 11}) == {("t", 0): E.none, ("t", 1): E.none}
    assert fetch(broker, 6) == {0: (-1, E.none), 1: (-1, E.none)}  # not visible, and no require_stable
    assert fetch(broker, 7) == {0: (-1, E.none), 1: (-1, E.none)}
    assert fetch(broker, 7, require_stable=True) == {0: (-1, E.unstable_offset_commit),
                                                     1: (-1, E.unstable_offset_commit)}
    end_txn(broker, commit=True)
    assert fetch(broker, 7, require_stable=True) == {0: (10, E.none), 1: (11, E.none)}


def test_the_batch_in_consumer_offsets_is_the_producers_transactional_one(broker):
    txn_commit(broker, epoch=2)
    log = broker.replica_manager.get_leader_partition(
        TopicPartition(OFFSETS_TOPIC, broker.group_coordinator.partition_for("g"))).log
    [batch] = iter_internal_batches(log.read(0, 1 << 20).read_bytes())
    assert (batch.producer_id, batch.is_transactional, len(batch.records)) == (PRODUCER_ID, True, 1)


def test_an_abort_leaves_the_last_committed_offset(broker):
    ask(broker, OFFSET_COMMIT, 8, {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                                   "topics": [{"name": "t", "partitions": [
                                       {"partition_index": 0, "committed_offset": 5}]}]})
    txn_commit(broker)
    assert fetch(broker, 8, partitions=[0]) == {0: (5, E.none)}
    assert fetch(broker, 8, partitions=[0], require_stable=True) == {0: (-1, E.unstable_offset_commit)}
    end_txn(broker, commit=False)
    assert fetch(broker, 8, partitions=[0], require_stable=True) == {0: (5, E.none)}


def test_an_older_producer_epoch_is_refused_at_every_version(broker):
    assert txn_commit(broker, epoch=1) == {("t", 0): E.none}
    for version in range(5):  # Kafka answers INVALID_PRODUCER_EPOCH, never PRODUCER_FENCED, here
        assert txn_commit(broker, version, offsets={("t", 0): 99}, epoch=0) == {("t", 0): E.invalid_producer_epoch}
    end_txn(broker, commit=True, epoch=1)
    assert fetch(broker, partitions=[0]) == {0: (10, E.none)}


def test_unknown_partitions_and_request_errors(broker):
    assert txn_commit(broker, offsets={("t", 0): 1, ("t", 2): 1, ("nope", 0): 1}) == {
        ("t", 0): E.none, ("t", 2): E.unknown_topic_or_partition, ("nope", 0): E.unknown_topic_or_partition}
    assert txn_commit(broker, group="") == {("t", 0): E.invalid_group_id}
    too_large = {"partition_index": 1, "committed_offset": 1, "committed_metadata": "x" * 5000}
    body = ask(broker, TXN_OFFSET_COMMIT, 4, {"transactional_id": "tx", "group_id": "g", "producer_id": PRODUCER_ID,
                                              "producer_epoch": 0, "topics": [{"name": "t", "partitions": [too_large]}]})
    assert body.topics[0].partitions[0].error_code == E.offset_metadata_too_large


@pytest.mark.parametrize("version", [3, 4])
def test_v3_checks_the_member_when_it_is_given(broker, version):
    assert txn_commit(broker, version, generation_id=-1, member_id="") == {("t", 0): E.none}
    assert txn_commit(broker, version, group="h", generation_id=1, member_id="m") == {("t", 0): E.unknown_member_id}
    assert txn_commit(broker, version, group="h", generation_id=0, member_id="m", group_instance_id="i") == \
        {("t", 0): E.unknown_member_id}
    # Kafka's rule: no generation and an Empty group is never checked, whatever member is named
    assert txn_commit(broker, version, group="h", member_id="m", group_instance_id="i") == {("t", 0): E.none}


@pytest.mark.parametrize("version, expected", [(0, E.coordinator_not_available), (1, E.coordinator_not_available),
                                               (2, E.coordinator_load_in_progress), (4, E.coordinator_load_in_progress)])
def test_a_loading_coordinator_as_old_clients_understand_it(broker, version, expected):
    broker.group_coordinator.loading.add(broker.group_coordinator.partition_for("g"))
    assert txn_commit(broker, version) == {("t", 0): expected}


def test_pending_offsets_survive_a_restart_until_their_marker(tmp_path):
    b = start(tmp_path)
    trio.run(functools.partial(b.create_topic, "t", num_partitions=2))
    txn_commit(b, offsets={("t", 0): 10})
    txn_commit(b, group="other", offsets={("t", 1): 7})
    end_txn(b, commit=True, group="other")
    b.shutdown()
    b = start(tmp_path)
    try:
        assert fetch(b, partitions=[0], require_stable=True) == {0: (-1, E.unstable_offset_commit)}
        assert fetch(b, group="other", partitions=[1], require_stable=True) == {1: (7, E.none)}
        end_txn(b, commit=True)
        assert fetch(b, partitions=[0], require_stable=True) == {0: (10, E.none)}
    finally:
        b.shutdown()
