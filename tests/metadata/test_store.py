import uuid

import pytest

from kbroker.errors import (
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kbroker.metadata.store import BrokerInfo, LocalMetadataStore, assign_replicas, validate_topic_name

ME = BrokerInfo(0, "127.0.0.1", 9092)


def test_topics_survive_reopen_with_ids_and_configs(tmp_path):
    store = LocalMetadataStore(tmp_path, ME)
    info = store.create_topic("orders", [[0], [0]], {"retention.ms": "5"})
    store.add_partitions("orders", [[0]])
    reopened = LocalMetadataStore(tmp_path, ME)
    again = reopened.topic("orders")
    assert (again.topic_id, again.num_partitions, again.configs) == (info.topic_id, 3, {"retention.ms": "5"})
    assert reopened.topic_by_id(info.topic_id) is again
    assert reopened.cluster_id == store.cluster_id and store.cluster_id


def test_listeners_hear_every_change(tmp_path):
    store = LocalMetadataStore(tmp_path, ME)
    heard = []
    store.add_listener(lambda name, info: heard.append((name, info and info.num_partitions)))
    store.create_topic("t", [[0]], {})
    store.add_partitions("t", [[0]])
    store.delete_topic("t")
    assert heard == [("t", 1), ("t", 2), ("t", None)]


def test_errors_are_kafkas(tmp_path):
    store = LocalMetadataStore(tmp_path, ME)
    store.create_topic("t", [[0]], {})
    with pytest.raises(TopicAlreadyExistsError):
        store.create_topic("t", [[0]], {})
    with pytest.raises(UnknownTopicOrPartitionError):
        store.delete_topic("nope")
    with pytest.raises(InvalidReplicaAssignmentError):
        store.create_topic("u", [[5]], {})
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas([ME], 1, 2)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a" * 250, "spaß"])
def test_illegal_topic_names(name):
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


def test_producer_id_blocks_never_repeat_across_reopen(tmp_path):
    first = LocalMetadataStore(tmp_path, ME).allocate_producer_ids(1000)
    second = LocalMetadataStore(tmp_path, ME).allocate_producer_ids(1000)
    assert second >= first + 1000


def test_topic_ids_are_random_uuids(tmp_path):
    store = LocalMetadataStore(tmp_path, ME)
    ids = {store.create_topic(f"t{i}", [[0]], {}).topic_id for i in range(5)}
    assert len(ids) == 5 and uuid.UUID(int=0) not in ids


def test_rack_aware_placement_spreads_each_partition_over_racks():
    from kbroker.metadata.store import BrokerInfo, assign_replicas

    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    brokers = [BrokerInfo(i, "h", 9092, rack) for i, rack in racks.items()]
    assignment = assign_replicas(brokers, 12, 3)
    for replicas in assignment:
        assert len(set(replicas)) == 3 and {racks[r] for r in replicas} == {"a", "b", "c"}
    leaders = [replicas[0] for replicas in assignment]
    assert all(leaders.count(b) == 2 for b in racks)  # leadership evenly spread too
    # more replicas than racks: every rack first, then any broker not chosen yet
    two_racks = [BrokerInfo(i, "h", 9092, "a" if i < 3 else "b") for i in (1, 2, 3, 4)]
    for replicas in assign_replicas(two_racks, 4, 3):
        assert len(set(replicas)) == 3 and {"a", "b"} <= {"a" if r < 3 else "b" for r in replicas}


def test_placement_without_racks_is_round_robin():
    from kbroker.metadata.store import BrokerInfo, assign_replicas

    brokers = [BrokerInfo(i, "h", 9092) for i in (1, 2, 3)]
    assert assign_replicas(brokers, 4, 2) == [[1, 2], [2, 3], [3, 1], [1, 2]]
