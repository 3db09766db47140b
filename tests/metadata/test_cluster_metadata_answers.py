"""A cluster broker's Metadata partitions are built once per change of its metadata cache and
reused until the next one (the store's `generation`): every answer, reused or not, equals a
fresh build from the cache, through UpdateMetadata, LeaderAndIsr and a broker leaving."""

from __future__ import annotations

import uuid
import weakref
from types import SimpleNamespace as NS

import trio

from kbroker.api import metadata as metadata_api
from kbroker.errors import ErrorCode
from kbroker.metadata.cluster import ClusterMetadataStore
from kbroker.metadata.store import BrokerInfo

from fake_zookeeper import FakeSession, FakeZooKeeper

TOPIC_ID = uuid.uuid4()


def update(brokers, states, epoch=1):
    """An UpdateMetadata request as the controller sends it: states {partition: (leader, leader_epoch, isr)}."""
    return NS(controller_id=1, controller_epoch=epoch,
              live_brokers=[NS(id_=b, rack=None, endpoints=[NS(listener="PLAINTEXT", security_protocol=0,
                                                               host="127.0.0.1", port=9091 + b)]) for b in brokers],
              topic_states=[NS(topic_name="t", topic_id=TOPIC_ID, partition_states=[
                  NS(partition_index=p, leader=leader, leader_epoch=le, isr=isr, replicas=[1, 2, 3],
                     offline_replicas=[], zk_version=le) for p, (leader, le, isr) in states.items()])])


def leader_and_isr(p, leader, leader_epoch, isr):
    return NS(topic_states=[NS(topic_name="t", partition_states=[
        NS(partition_index=p, leader=leader, leader_epoch=leader_epoch, isr=isr, replicas=[1, 2, 3],
           partition_epoch=leader_epoch)])])


def answer(store) -> list[dict]:
    ctx = NS(broker=NS(metadata=store))
    return metadata_api._cluster_topic_metadata(ctx, store.topic("t"))["partitions"]


def fresh(store) -> list[dict]:
    saved = metadata_api._PARTITIONS_BUILT
    metadata_api._PARTITIONS_BUILT = weakref.WeakKeyDictionary()
    try:
        return answer(store)
    finally:
        metadata_api._PARTITIONS_BUILT = saved


def test_metadata_partitions_are_reused_only_while_the_cache_stands():
    async def main():
        store = ClusterMetadataStore(FakeSession(FakeZooKeeper()), BrokerInfo(1, "127.0.0.1", 9092))
        store.apply_update_metadata(update([1, 2, 3], {0: (1, 0, [1, 2, 3]), 1: (2, 0, [1, 2, 3])}))
        first = answer(store)
        assert first == fresh(store) and [p["leader_id"] for p in first] == [1, 2]
        assert answer(store) is first  # nothing changed: the same entries

        store.note_leader_and_isr(leader_and_isr(0, 3, 1, [3, 2]))  # this broker learns a new leader first
        moved = answer(store)
        assert moved is not first and moved == fresh(store)
        assert (moved[0]["leader_id"], moved[0]["leader_epoch"], moved[0]["isr_nodes"]) == (3, 1, [3, 2])

        store.note_leader_and_isr(leader_and_isr(0, 2, 1, [2]))  # not newer: ignored, nothing rebuilt
        assert answer(store) is moved

        store.apply_update_metadata(update([1, 3], {0: (3, 1, [3, 2]), 1: (2, 0, [1, 2, 3])}))  # broker 2 left
        gone = answer(store)
        assert gone == fresh(store)
        assert gone[1]["error_code"] == ErrorCode.leader_not_available and gone[1]["leader_id"] == -1

    trio.run(main)
