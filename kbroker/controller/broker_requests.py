"""The bodies of the controller's requests to brokers (LeaderAndIsr v7, UpdateMetadata v8,
StopReplica v4), built from controller state as plain dicts: pure, no I/O.

Like Kafka's ControllerBrokerRequestBatch, one decision produces at most one request of each kind
per broker, carrying every partition it concerns.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from kbroker.controller.context import LEADER_DURING_DELETE, ControllerContext, TopicPartition
from kbroker.zookeeper.znodes import SECURITY_PROTOCOL_IDS, BrokerRegistration

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 4, 5, 6, 7
VERSIONS = {LEADER_AND_ISR: 7, STOP_REPLICA: 4, UPDATE_METADATA: 8, CONTROLLED_SHUTDOWN: 3}
PLAINTEXT = 0  # SecurityProtocol id


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(set(partitions)):
        grouped[topic].append(partition)
    return grouped


def leader_and_isr(ctx: ControllerContext, controller_id: int, broker: BrokerRegistration,
                   partitions: Iterable[TopicPartition], is_new: bool = False) -> dict:
    topic_states = []
    leaders: set[int] = set()
    for topic, indexes in _by_topic(partitions).items():
        states = []
        for p in indexes:
            state = ctx.states.get((topic, p))
            if state is None:
                continue
            leaders.add(state.leader)
            states.append({
                "partition_index": p, "controller_epoch": state.controller_epoch, "leader": state.leader,
                "leader_epoch": state.leader_epoch, "isr": list(state.isr), "partition_epoch": state.partition_epoch,
                "replicas": ctx.replicas((topic, p)), "adding_replicas": ctx.adding((topic, p)),
                "removing_replicas": ctx.removing((topic, p)),
                "is_new": is_new, "leader_recovery_state": 0,
            })
        if states:
            topic_states.append({"topic_name": topic, "topic_id": ctx.topic_id(topic), "partition_states": states})
    return {
        "controller_id": controller_id, "is_k_raft_controller": False, "controller_epoch": ctx.epoch,
        "broker_epoch": broker.epoch, "type_": 0, "topic_states": topic_states,
        "live_leaders": [{"broker_id": b.broker_id, "host_name": b.host, "port": b.port}
                         for b in (ctx.live_brokers.get(i) for i in sorted(leaders)) if b is not None],
    }


FULL, INCREMENTAL = 2, 1  # UpdateMetadata's Type (KIP-866)


def update_metadata(ctx: ControllerContext, controller_id: int, broker: BrokerRegistration,
                    partitions: Iterable[TopicPartition], deleting: bool = False, full: bool = False) -> dict:
    """`full`: every partition of the cluster is in it, so a topic it lacks does not exist."""
    topic_states = []
    for topic, indexes in _by_topic(partitions).items():
        states = []
        for p in indexes:
            state = ctx.states.get((topic, p))
            replicas = ctx.replicas((topic, p))
            assignment = ctx.topics.get(topic)
            if deleting or (assignment is not None and assignment.is_retiring(p)):  # retiring: no longer advertised
                states.append({"partition_index": p, "controller_epoch": ctx.epoch, "leader": LEADER_DURING_DELETE,
                               "leader_epoch": -1, "isr": [], "zk_version": -1, "replicas": replicas,
                               "offline_replicas": []})
                continue
            if state is None:  # never had a leader: announced offline, so clients see the partition
                states.append({"partition_index": p, "controller_epoch": ctx.epoch, "leader": -1, "leader_epoch": -1,
                               "isr": [], "zk_version": -1, "replicas": replicas,
                               "offline_replicas": ctx.offline_replicas((topic, p))})
                continue
            states.append({
                "partition_index": p, "controller_epoch": state.controller_epoch, "leader": state.leader,
                "leader_epoch": state.leader_epoch, "isr": list(state.isr), "zk_version": state.partition_epoch,
                "replicas": replicas, "offline_replicas": ctx.offline_replicas((topic, p)),
            })
        if states:
            topic_states.append({"topic_name": topic, "topic_id": ctx.topic_id(topic), "partition_states": states})
    return {
        "controller_id": controller_id, "is_k_raft_controller": False, "controller_epoch": ctx.epoch,
        "broker_epoch": broker.epoch, "topic_states": topic_states, "type_": FULL if full else INCREMENTAL,
        "live_brokers": [
            {"id_": b.broker_id, "rack": b.rack,
             "endpoints": [{"port": port, "host": host, "listener": name,
                            "security_protocol": SECURITY_PROTOCOL_IDS.get(protocol, PLAINTEXT)}
                           for name, protocol, host, port in b.all_endpoints()]}
            for b in sorted(ctx.live_brokers.values(), key=lambda b: b.broker_id)
        ],
    }


def stop_replica(ctx: ControllerContext, controller_id: int, broker: BrokerRegistration,
                 partitions: Iterable[TopicPartition], delete: bool) -> dict:
    topic_states = []
    for topic, indexes in _by_topic(partitions).items():
        topic_states.append({"topic_name": topic, "partition_states": [
            {"partition_index": p,
             "leader_epoch": -2 if delete else (ctx.states[(topic, p)].leader_epoch if (topic, p) in ctx.states else -1),
             "delete_partition": delete}
            for p in indexes]})
    return {"controller_id": controller_id, "is_k_raft_controller": False, "controller_epoch": ctx.epoch,
            "broker_epoch": broker.epoch, "topic_states": topic_states}
