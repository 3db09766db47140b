"""SharePersister: where share-partition state is read and written (Kafka's Persister and share
coordinator, KIP-932). A share-partition's state lives in one partition of `__share_group_state`
(Kafka's hash of "group:topicId:partition"); the leader of that partition is the share-partition's
*state coordinator*.

- The coordinator side (`read_local`, `write_local`, `delete_local`): snapshots of the state
  partitions led here, read from the log once per leader epoch and kept in memory; a write appends
  one ShareSnapshot record and, in a cluster, is answered once the ISR has it (acks=all, bounded by
  the topic's min.insync.replicas). Fencing as Kafka's share coordinator: a write or read from a
  share-partition leader older than the stored leader epoch is FENCED_LEADER_EPOCH, a write of an
  older state epoch (the group coordinator reset the state since) FENCED_STATE_EPOCH; a read with a
  newer leader epoch records it, so a paused old leader's later writes are refused.
- The client side (`read`, `write`, `delete`): to the local coordinator side when this broker leads
  the state partition, else ReadShareGroupState / WriteShareGroupState / DeleteShareGroupState (84,
  85, 86) to the broker that does, over the `request` channel the server injects in a cluster.
  NOT_COORDINATOR, a coordinator still loading or unreachable is retried (backoff) until
  `timeout_s`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.group.types import partition_for
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.internal_topic import read_internal_batches
from kbroker.share.partition_types import PersisterStateBatch, ShareSnapshot
from kbroker.share.state_records import (SHARE_STATE_TOPIC, ShareStateKey, ShareStateValue, decode_key, decode_value,
                                         encode_key, encode_value)
from kbroker.wire.internal_records import build_internal_batch
from kbroker.wire.records import validate_batches

logger = logging.getLogger(__name__)

E = ErrorCode
READ_STATE, WRITE_STATE, DELETE_STATE = 84, 85, 86
Request = Callable[[int, int, int, dict], Awaitable[Any]]  # (broker id, api key, version, body) -> response
RETRIABLE = frozenset({E.not_coordinator, E.coordinator_not_available, E.coordinator_load_in_progress,
                       E.not_leader_or_follower, E.request_timed_out, E.not_enough_replicas,
                       E.not_enough_replicas_after_append, E.unknown_topic_or_partition})
KEEP_LEADER_EPOCH = -1  # a write that is not a leader's (the group coordinator's reset) keeps the stored one


class SharePersister:
    def __init__(self, replica_manager, clock: Callable[[], int], *, node_id: int, cluster: bool,
                 state_partitions: int, leader_of: Callable[[tuple[str, int]], int | None],
                 timeout_s: float = 15.0) -> None:
        self.replicas = replica_manager
        self.clock = clock
        self.node_id = node_id
        self.cluster = cluster
        self.state_partitions = state_partitions
        self.leader_of = leader_of  # a partition's leader id (None: no such topic; -1: none now)
        self.timeout_s = timeout_s
        self.request: Request | None = None  # set in a cluster
        # per local state partition: (the leader epoch it was read at, its snapshots)
        self._snapshots: dict[int, tuple[int, dict[ShareStateKey, ShareStateValue]]] = {}

    def partition_of(self, key: ShareStateKey) -> int:
        return partition_for(key.coordinator_key(), self.state_partitions)

    # -- the coordinator side: state partitions led here ------------------------------------------------
    def _leader(self, partition: int):
        """The local leader of a state partition; KafkaError NOT_COORDINATOR when it is not led here."""
        try:
            return self.replicas.get_leader_partition(TopicPartition(SHARE_STATE_TOPIC, partition))
        except KafkaError:
            raise KafkaError(f"{SHARE_STATE_TOPIC}-{partition} is not led here", E.not_coordinator) from None

    def leads(self, partition: int) -> bool:
        try:
            self._leader(partition)
        except KafkaError:
            return False
        return True

    def _loaded(self, partition: int) -> dict[ShareStateKey, ShareStateValue]:
        leader = self._leader(partition)
        cached = self._snapshots.get(partition)
        if cached is not None and cached[0] == leader.leader_epoch:
            return cached[1]
        snapshots: dict[ShareStateKey, ShareStateValue] = {}
        for batch in read_internal_batches(self.replicas, TopicPartition(SHARE_STATE_TOPIC, partition)):
            for _offset, raw_key, raw_value in batch.records:
                k = decode_key(raw_key) if raw_key is not None else None
                if k is None:
                    continue
                if raw_value is None:
                    snapshots.pop(k, None)
                    continue
                try:
                    snapshots[k] = decode_value(raw_value)
                except ValueError as exc:
                    logger.warning("unreadable share state for %s in %s-%d: %s", k, SHARE_STATE_TOPIC, partition, exc)
        self._snapshots[partition] = (leader.leader_epoch, snapshots)
        return snapshots

    def local_keys(self, group_id: str) -> list[ShareStateKey]:
        """The group's share-partitions with state in the state partitions led here."""
        found = []
        for partition in range(self.state_partitions):
            if self.leads(partition):
                found.extend(k for k in self._loaded(partition) if k.group_id == group_id)
        return found

    async def _append(self, partition: int, key: ShareStateKey, value: ShareStateValue | None) -> ErrorCode:
        try:
            leader = self._leader(partition)
            snapshots = self._loaded(partition)
            buf = bytearray(build_internal_batch([(encode_key(key), encode_value(value) if value else None)],
                                                 self.clock()))
            info = leader.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1, from_client=False)
        except KafkaError as exc:
            return error_code_of(exc)
        if value is None:
            snapshots.pop(key, None)
        else:
            snapshots[key] = value
        if not self.cluster:
            return E.none
        return await self.replicas.wait_for_replication(leader, info.last_offset + 1, self.timeout_s)

    async def read_local(self, key: ShareStateKey, leader_epoch: int) -> tuple[ErrorCode, ShareStateValue | None]:
        """The stored state (None: none yet). A share-partition leader's newer epoch is recorded."""
        partition = self.partition_of(key)
        try:
            stored = self._loaded(partition).get(key)
        except KafkaError as exc:
            return error_code_of(exc), None
        if stored is None:
            return E.none, None
        if leader_epoch >= 0 and leader_epoch < stored.leader_epoch:
            return E.fenced_leader_epoch, None
        if leader_epoch > stored.leader_epoch:
            newer = stored._replace(leader_epoch=leader_epoch)
            code = await self._append(partition, key, newer)
            if code != E.none:
                return code, None
            stored = newer
        return E.none, stored

    async def write_local(self, key: ShareStateKey, value: ShareStateValue) -> ErrorCode:
        partition = self.partition_of(key)
        try:
            stored = self._loaded(partition).get(key)
        except KafkaError as exc:
            return error_code_of(exc)
        if stored is not None:
            if value.leader_epoch == KEEP_LEADER_EPOCH:
                value = value._replace(leader_epoch=stored.leader_epoch)
            elif value.leader_epoch < stored.leader_epoch:
                return E.fenced_leader_epoch
            if value.state_epoch < stored.state_epoch:
                return E.fenced_state_epoch
            value = value._replace(snapshot_epoch=(stored.snapshot_epoch + 1) & 0xFFFF)
        return await self._append(partition, key, value)

    async def delete_local(self, key: ShareStateKey) -> ErrorCode:
        partition = self.partition_of(key)
        try:
            if key not in self._loaded(partition):
                return E.none
        except KafkaError as exc:
            return error_code_of(exc)
        return await self._append(partition, key, None)

    # -- the client side: to whichever broker leads the state partition ---------------------------------
    async def _routed(self, key: ShareStateKey, local: Callable[[], Awaitable[Any]], api_key: int, version: int,
                      body: dict, answer: Callable[[Any], Any], failed: Any) -> Any:
        """`local()` where the state partition is led here, else the request to its leader; retried
        while the coordinator moves, until timeout_s. `answer` maps a response to the result;
        `failed(code)` is the result of an error that is not retried."""
        deadline = trio.current_time() + self.timeout_s
        delay = 0.05
        while True:
            partition = self.partition_of(key)
            leader = self.leader_of((SHARE_STATE_TOPIC, partition)) if self.cluster else self.node_id
            if leader is None:  # the state topic is not (yet) known here
                result = failed(E.coordinator_not_available)
            elif leader == self.node_id:
                result = await local()
            elif leader < 0 or self.request is None:
                result = failed(E.coordinator_not_available)
            else:
                try:
                    result = answer(await self.request(leader, api_key, version, body))
                except Exception as exc:  # noqa: BLE001 - unreachable or moving: retried below
                    logger.info("share state request to broker %d failed: %s", leader, exc)
                    result = failed(E.coordinator_not_available)
            code = result[0] if isinstance(result, tuple) else result
            if code not in RETRIABLE or trio.current_time() + delay > deadline:
                return result
            await trio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def read(self, key: ShareStateKey, leader_epoch: int) -> tuple[ErrorCode, ShareStateValue | None]:
        body = {"group_id": key.group_id, "topics": [{"topic_id": key.topic_id, "partitions": [
            {"partition": key.partition, "leader_epoch": leader_epoch}]}]}
        return await self._routed(key, lambda: self.read_local(key, leader_epoch), READ_STATE, 0, body,
                                  lambda response: _read_answer(response, key), lambda code: (code, None))

    async def write(self, key: ShareStateKey, value: ShareStateValue) -> ErrorCode:
        body = {"group_id": key.group_id, "topics": [{"topic_id": key.topic_id, "partitions": [
            {"partition": key.partition, "state_epoch": value.state_epoch, "leader_epoch": value.leader_epoch,
             "start_offset": value.snapshot.start_offset,
             "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                               for b in value.snapshot.state_batches]}]}]}
        return await self._routed(key, lambda: self.write_local(key, value), WRITE_STATE, 0, body,
                                  lambda response: _partition_code(response, key), lambda code: code)

    async def delete(self, key: ShareStateKey) -> ErrorCode:
        body = {"group_id": key.group_id, "topics": [{"topic_id": key.topic_id,
                                                      "partitions": [{"partition": key.partition}]}]}
        return await self._routed(key, lambda: self.delete_local(key), DELETE_STATE, 0, body,
                                  lambda response: _partition_code(response, key), lambda code: code)


def _result_of(response, key: ShareStateKey):
    for topic in response.results:
        if topic.topic_id == key.topic_id:
            for p in topic.partitions:
                if p.partition == key.partition:
                    return p
    return None


def _partition_code(response, key: ShareStateKey) -> ErrorCode:
    p = _result_of(response, key)
    return E.unknown_server_error if p is None else ErrorCode(p.error_code)


def _read_answer(response, key: ShareStateKey) -> tuple[ErrorCode, ShareStateValue | None]:
    p = _result_of(response, key)
    if p is None:
        return E.unknown_server_error, None
    code = ErrorCode(p.error_code)
    if code != E.none or p.state_epoch < 0:  # state epoch -1: no state yet
        return code, None
    batches = tuple(PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in p.state_batches)
    return E.none, ShareStateValue(ShareSnapshot(p.start_offset, batches), state_epoch=p.state_epoch)

