"""The replication throttle of `kbroker reassign`, as kafka-reassign-partitions.sh sets and clears it.

`--execute --throttle RATE`, before the moves start: for every partition moving (the plan's, and
any move already in progress), the topic config `leader.replication.throttled.replicas` names its
current replicas (the sources, which lead or may lead while it moves) and
`follower.replication.throttled.replicas` the replicas being added (the destinations), as
"partition:broker" entries; every broker involved (sources and destinations) gets the dynamic
configs `leader.replication.throttled.rate` and `follower.replication.throttled.rate`.

`--verify`, once no move is in progress anywhere in the cluster (the rates are per broker and
shared by every move): the two rates are deleted on every live broker and the two replica lists on
the plan's topics. This module owns the move arithmetic (pure) and those config requests.
"""

from __future__ import annotations

from typing import Iterable

from kio.schema.errors import ErrorCode

from kbroker.admin.client import (
    CONFIG_DELETE,
    CONFIG_SET,
    INCREMENTAL_ALTER_CONFIGS,
    AdminClient,
    AdminError,
    KafkaErrorResponse,
)

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
RESOURCE_BROKER = 4  # IncrementalAlterConfigs resource type

Partition = tuple[str, int]
Move = tuple[frozenset[int], frozenset[int]]  # (sources, destinations)
InProgress = dict[Partition, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]  # replicas, adding, removing


def proposed_moves(in_progress: InProgress, plan: dict[Partition, list[int]],
                   current: dict[Partition, list[int]]) -> dict[Partition, Move]:
    """Every partition that will be moving (Kafka's calculateProposedMoveMap): a move in progress
    keeps its sources (its replicas without those being added); a planned one moves from them, or
    from its current replicas, to the target replicas that are not sources."""
    moves: dict[Partition, Move] = {}
    for key, (replicas, adding, _removing) in in_progress.items():
        moves[key] = (frozenset(replicas) - frozenset(adding), frozenset(adding))
    for key, target in plan.items():
        if key in moves:
            sources = moves[key][0]
        elif key in current:
            sources = frozenset(current[key])
        else:
            raise AdminError(f"{key[0]}-{key[1]} has no replicas: is the partition there?")
        moves[key] = (sources, frozenset(target) - sources)
    return moves


def replica_lists(moves: dict[Partition, Move]) -> tuple[dict[str, str], dict[str, str]]:
    """(topic -> leader.replication.throttled.replicas, topic -> follower.replication.throttled.replicas)."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    for (topic, partition), (sources, destinations) in moves.items():
        leaders.setdefault(topic, set()).update(f"{partition}:{b}" for b in sources)
        followers.setdefault(topic, set()).update(f"{partition}:{b}" for b in destinations - sources)
    return ({t: ",".join(sorted(v, key=_entry_order)) for t, v in leaders.items()},
            {t: ",".join(sorted(v, key=_entry_order)) for t, v in followers.items()})


def _entry_order(entry: str) -> tuple[int, int]:
    partition, _, broker = entry.partition(":")
    return int(partition), int(broker)


def reassigning_brokers(moves: dict[Partition, Move]) -> list[int]:
    return sorted({b for sources, destinations in moves.values() for b in sources | destinations})


# -- the config requests -----------------------------------------------------------------------------

def set_throttle(admin: AdminClient, moves: dict[Partition, Move], rate: int) -> list[str]:
    """Replica lists on the moving topics, then the rates on every broker involved; the lines to print."""
    leaders, followers = replica_lists(moves)
    for topic in sorted(set(leaders) | set(followers)):
        admin.alter_topic_configs(topic, {LEADER_REPLICAS: leaders.get(topic, ""),
                                          FOLLOWER_REPLICAS: followers.get(topic, "")}, ())
    brokers = reassigning_brokers(moves)
    _alter_brokers(admin, brokers, {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}, ())
    return [f"The inter-broker throttle limit was set to {rate} B/s"]


def clear_throttles(admin: AdminClient, topics: Iterable[str], brokers: Iterable[int]) -> list[str]:
    """Remove the rates from `brokers` (those alive; a stopped one keeps its znode until this runs
    again) and the replica lists from `topics`; the lines to print."""
    live, _topics = admin.metadata([])
    wanted = sorted(set(brokers) | set(live))
    down = [b for b in wanted if b not in live]
    up = [b for b in wanted if b in live]
    lines = [f"Clearing broker-level throttles on broker{'s' if len(up) != 1 else ''} {','.join(map(str, up))}"]
    _alter_brokers(admin, up, {}, (LEADER_RATE, FOLLOWER_RATE))
    if down:
        lines.append(f"Broker{'s' if len(down) != 1 else ''} {','.join(map(str, down))} not running: their "
                     "throttle rates stay until --verify runs again with them up")
    topics = sorted(set(topics))
    lines.append(f"Clearing topic-level throttles on topic{'s' if len(topics) != 1 else ''} {','.join(topics)}")
    for topic in topics:
        admin.alter_topic_configs(topic, {}, (LEADER_REPLICAS, FOLLOWER_REPLICAS))
    return lines


def _alter_brokers(admin: AdminClient, broker_ids: Iterable[int], set_configs: dict[str, str],
                   delete_configs: Iterable[str]) -> None:
    """IncrementalAlterConfigs of each broker's own resource, sent to that broker (Kafka's admin
    client routes a broker resource there; a broker alters only its own)."""
    live, _topics = admin.metadata([])
    ops = [{"name": k, "config_operation": CONFIG_SET, "value": v} for k, v in set_configs.items()]
    ops += [{"name": k, "config_operation": CONFIG_DELETE, "value": None} for k in delete_configs]
    for broker_id in broker_ids:
        broker = live.get(broker_id)
        if broker is None:
            raise AdminError(f"broker {broker_id} is not running: cannot set its replication throttle")
        body = admin.connection(broker.host, broker.port).call(INCREMENTAL_ALTER_CONFIGS, {
            "resources": [{"resource_type": RESOURCE_BROKER, "resource_name": str(broker_id), "configs": ops}],
            "validate_only": False})
        for r in body.responses:
            if r.error_code != ErrorCode.none:
                raise KafkaErrorResponse(r.error_code, f"IncrementalAlterConfigs for broker {broker_id}",
                                         r.error_message)
