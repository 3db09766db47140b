"""Followers fetching from their leaders: one task per leader broker, multiplexing its partitions.

A partition that starts following first asks the leader where its log and the leader's diverge
(OffsetForLeaderEpoch with the follower's latest leader epoch) and truncates there — an old
leader's unacknowledged tail goes — then fetches from its log end with Fetch v12 carrying its
replica id and current leader epoch, in an incremental fetch session with that leader (KIP-227:
after the first full request only changed partitions are sent, and only partitions with news come
back; `fetch_session/client.py`). Fetched batches keep their offsets (`append_as_follower`);
the follower's high watermark is the leader's, capped by its own log end. The leader learns the
follower's progress from the fetch offsets.

The follower's replication throttle (Kafka's): a throttled partition that is not in sync (behind
the leader's high watermark at its last fetch, or not fetched yet) is left out of the fetch while
the follower quota is exceeded (with nothing else to fetch, the fetcher waits until the quota
allows again, at most `replica.fetch.backoff.ms`); the bytes of every throttled partition fetched
count towards it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

import trio

from kbroker.errors import ErrorCode
from kbroker.fetch_session import (
    ZERO_UUID,
    FetchSessionHandler,
    PartitionRequest,
    TopicIdPartition,
)
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.protocol import to_ms
from kbroker.wire.records import validate_batches

logger = logging.getLogger(__name__)

FETCH, OFFSET_FOR_LEADER_EPOCH, LIST_OFFSETS = 1, 23, 2
FETCH_VERSION, OFFSET_FOR_LEADER_EPOCH_VERSION, LIST_OFFSETS_VERSION = 12, 4, 8
EARLIEST_LOCAL_TIMESTAMP = -4  # ListOffsets v8+: the leader's local log start (tiered storage)
UNDEFINED_EPOCH = -1
_RETRY_ERRORS = {ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
                 ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available, ErrorCode.kafka_storage_error}

FULL_ROUND_S = 5.0  # steady rounds look only at what moved; a full one at least this often (follower retention)
_SESSION_ERRORS = {ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch,
                   ErrorCode.fetch_session_topic_id_error}

OpenChannel = Callable[[str, int], Any]  # (host, port) -> a channel with `await request(api_key, version, body)`


@dataclass
class _FetchState:
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0
    in_sync: bool = False  # at the leader's high watermark after the last fetch (Kafka: lag 0)
    moved_to_tiered: bool = False  # the leader archived our fetch offset: restart at its local log start
    entry: tuple[TopicIdPartition, PartitionRequest] | None = None  # what the fetch session last got

    def session_entry(self, tp: TopicPartition, log, max_bytes: int) -> tuple[TopicIdPartition, PartitionRequest]:
        """The partition as the fetch session names it, and its fetch parameters now: the same
        objects as last time while nothing moved, so the session sees no change cheaply."""
        entry = self.entry
        end, start = log.log_end_offset, log.log_start_offset
        if entry is not None:
            req = entry[1]
            if (req.fetch_offset == end and req.log_start_offset == start
                    and req.current_leader_epoch == self.leader_epoch and req.max_bytes == max_bytes):
                return entry
            tip = entry[0]
        else:
            tip = TopicIdPartition(ZERO_UUID, tp.topic, tp.partition)
        self.entry = (tip, PartitionRequest(end, max_bytes, start, self.leader_epoch))
        return self.entry


class _LeaderFetcher:
    def __init__(self, manager: "ReplicaFetcherManager", leader_id: int, endpoint: tuple[str, int]) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.endpoint = endpoint
        self.partitions: dict[TopicPartition, _FetchState] = {}
        self.scope = trio.CancelScope()
        self.changed = trio.Event()
        self._pause_s = manager.backoff_s
        self.channel = manager.open_channel(*endpoint)
        self.session = FetchSessionHandler()  # our incremental fetch session with this leader (KIP-227)
        # steady rounds: while every partition simply fetches, a round looks only at those whose
        # fetch offset or log start may have moved (`dirty`: the answered ones), with a full round
        # every FULL_ROUND_S and after any change of membership or state
        self.steady = False
        self.dirty: set[TopicPartition] = set()
        self.next_full_round = 0.0

    def poke(self) -> None:
        self.steady = False  # its partitions changed: the next round looks at all of them
        self.changed.set()

    async def run(self) -> None:
        with self.scope:
            try:
                while True:
                    if not self.partitions:  # idle until the controller gives it partitions again
                        self.changed = trio.Event()
                        await self.changed.wait()
                    elif not await self._round():
                        await self._backoff(self._pause_s)
            finally:
                with trio.CancelScope(shield=True):
                    await self.channel.aclose()

    async def _backoff(self, delay_s: float) -> None:
        self.changed = trio.Event()
        with trio.move_on_after(delay_s):
            await self.changed.wait()

    async def _round(self) -> bool:
        """One truncation and/or fetch round; False when nothing could be done (back off for `_pause_s`)."""
        now = trio.current_time()
        self._pause_s = self.manager.backoff_s
        rm = self.manager.replica_manager
        if self.steady and now < self.next_full_round and not self.session.next_metadata.is_full \
                and not rm.quotas.follower.throttled_topics:
            try:
                await self._fetch(None)
                return True
            except Exception as exc:  # noqa: BLE001 - the leader may be gone; the controller will tell
                logger.info("fetching from broker %d at %s:%d failed: %s", self.leader_id, *self.endpoint, exc)
                return False
        self.steady = False
        self.next_full_round = now + FULL_ROUND_S
        ready = {}
        special = False  # some partition truncates or restarts at the leader's local log start
        node_id, leader_id = self.manager.node_id, self.leader_id
        for tp, state in list(self.partitions.items()):
            partition = rm.partitions.get(tp)
            if partition is None or partition.leader_id != leader_id or leader_id == node_id:
                self.partitions.pop(tp, None)
                continue
            state.leader_epoch = partition.leader_epoch
            if state.delayed_until <= now:
                ready[tp] = (partition, state)
                special = special or state.truncating or state.moved_to_tiered
        if not ready:
            return False
        truncating = {tp: v for tp, v in ready.items() if v[1].truncating} if special else {}
        try:
            tiered = {tp: v for tp, v in ready.items() if v[1].moved_to_tiered} if special else {}
            if tiered:
                await self._start_at_local_log_start(tiered)
                return True
            if truncating:
                await self._truncate(truncating)
            fetching = {tp: v for tp, v in ready.items()
                        if not v[1].truncating and (v[1].in_sync or not self._throttled(tp, v[1]))}
            if not fetching and not truncating:  # held back by the throttle: until the quota allows again
                throttle_ms = self.manager.replica_manager.quotas.follower.throttle_time_ms()
                self._pause_s = min(self._pause_s, max(throttle_ms, 10) / 1000)
            if fetching:
                self.dirty = set()
                steady = len(fetching) == len(self.partitions) and not special
                self.steady = True  # provisionally: an answer's error or truncation turns it off
                await self._fetch(fetching)
                self.steady = self.steady and steady and self.steady_candidate()
                return True
        except Exception as exc:  # noqa: BLE001 - the leader may be gone; the controller will tell
            self.steady = False
            logger.info("fetching from broker %d at %s:%d failed: %s", self.leader_id, *self.endpoint, exc)
            return False
        return bool(truncating)

    def _throttled(self, tp: TopicPartition, state: _FetchState) -> bool:
        """Kafka's shouldFollowerThrottle: never an in-sync partition, so it keeps its ISR place."""
        quota = self.manager.replica_manager.quotas.follower
        return not state.in_sync and quota.is_throttled(tp) and quota.is_quota_exceeded()

    async def _truncate(self, parts: dict) -> None:
        topics: dict[str, list[dict]] = {}
        for tp, (partition, state) in parts.items():
            latest = partition.log.leader_epoch_cache.latest_epoch
            if latest is None or latest < 0 or partition.log.log_end_offset == partition.log.log_start_offset:
                state.truncating = False  # nothing of ours that could diverge
                continue
            topics.setdefault(tp.topic, []).append(
                {"partition": tp.partition, "current_leader_epoch": state.leader_epoch, "leader_epoch": latest})
        if not topics:
            return
        response = await self.channel.request(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, {
            "replica_id": self.manager.node_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        })
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                if tp not in parts:
                    continue
                partition, state = parts[tp]
                if p.error_code != ErrorCode.none:
                    state.delayed_until = trio.current_time() + self.manager.backoff_s
                    continue
                offset, complete = truncation_offset(partition.log, p.leader_epoch, p.end_offset)
                if offset < partition.log.log_end_offset:
                    logger.info("%s: truncating from %d to %d (leader %d epoch %d ends at %d)", tp,
                                partition.log.log_end_offset, offset, self.leader_id, p.leader_epoch, p.end_offset)
                    partition.log.truncate_to(offset)
                state.truncating = not complete  # ask again with our new latest epoch

    async def _start_at_local_log_start(self, parts: dict) -> None:
        """Kafka's answer to OFFSET_MOVED_TO_TIERED_STORAGE: what the follower needs lies in the
        archive, which it never copies; it asks the leader's local log start (ListOffsets
        earliest-local) and starts its log there, empty. Kafka rebuilds the leader epochs and
        producer state below that offset from the archive; here the epochs start at the batches
        fetched from there on."""
        topics: dict[str, list[dict]] = {}
        for tp, (_partition, state) in parts.items():
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "timestamp": EARLIEST_LOCAL_TIMESTAMP,
                                                    "current_leader_epoch": state.leader_epoch})
        response = await self.channel.request(LIST_OFFSETS, LIST_OFFSETS_VERSION, {
            "replica_id": self.manager.node_id, "isolation_level": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in parts:
                    continue
                partition, state = parts[tp]
                state.moved_to_tiered = False
                if p.error_code != ErrorCode.none or p.offset < 0:
                    state.delayed_until = trio.current_time() + self.manager.backoff_s
                    continue
                if p.offset > partition.log.log_end_offset:
                    logger.info("%s: the leader archived offsets up to its local log start %d; restarting the "
                                "log there", tp, p.offset)
                    partition.log.truncate_fully_and_start_at(p.offset)
                state.truncating = False

    def steady_candidate(self) -> bool:
        """After a full round's fetch: whether nothing needs a full round (no partition delayed,
        truncating or moving to the leader's local log start)."""
        now = trio.current_time()
        return all(not (s.truncating or s.moved_to_tiered or s.delayed_until > now) for s in self.partitions.values())

    def _steady_entries(self) -> list | None:
        """A steady round's changed partitions, or None when one of them needs a full round."""
        m = self.manager
        rm = m.replica_manager
        dirty, self.dirty = self.dirty, set()
        now = trio.current_time()
        entries = []
        for tp in dirty:
            state = self.partitions.get(tp)
            if state is None:
                continue
            partition = rm.partitions.get(tp)
            if partition is None or partition.leader_id != self.leader_id or state.truncating \
                    or state.moved_to_tiered or state.delayed_until > now:
                return None
            entries.append(state.session_entry(tp, partition.log, m.partition_max_bytes))
        return entries

    async def _fetch(self, parts: dict | None) -> None:
        """One Fetch in the fetch session with this leader: only what changed since the last one
        (fetch offsets, log starts, leader epochs; added and dropped partitions) is sent, and the
        answer carries only the partitions with news. `parts` None: a steady round, which builds
        only the partitions answered last time (their offsets moved)."""
        m = self.manager
        if parts is None:
            entries = self._steady_entries()
            data = self.session.build_changed(entries) if entries is not None else None
            if data is None:
                self.steady = False
                self.next_full_round = 0.0
                return
        else:
            data = self.session.build(state.session_entry(tp, partition.log, m.partition_max_bytes)
                                      for tp, (partition, state) in parts.items())
        topics: dict[str, list[dict]] = {}
        for tip, req in data.to_send:
            topics.setdefault(tip.topic, []).append({
                "partition": tip.partition, "current_leader_epoch": req.current_leader_epoch,
                "fetch_offset": req.fetch_offset, "last_fetched_epoch": -1,
                "log_start_offset": req.log_start_offset, "partition_max_bytes": req.max_bytes,
            })
        forgotten: dict[str, list[int]] = {}
        for tip in data.to_forget:
            forgotten.setdefault(tip.topic, []).append(tip.partition)
        try:
            response = await self.channel.request(FETCH, FETCH_VERSION, {
                "replica_id": m.node_id, "max_wait": m.max_wait_ms, "min_bytes": m.min_bytes,
                "max_bytes": m.max_bytes, "isolation_level": 0,
                "session_id": data.metadata.session_id, "session_epoch": data.metadata.epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
                "rack_id": "",
            }, timeout_s=m.max_wait_ms / 1000 + m.request_timeout_s)
        except BaseException:
            self.session.handle_error()
            raise
        answered = [TopicIdPartition(ZERO_UUID, topic.topic, p.partition_index)
                    for topic in response.responses for p in topic.partitions]
        if not self.session.handle_response(response.error_code, response.session_id, answered,
                                            to_ms(response.throttle_time)):
            if response.error_code in _SESSION_ERRORS:
                logger.info("fetch session with broker %d: %s; starting a new one", self.leader_id,
                            ErrorCode(response.error_code).name)
                return  # the next request is full, at once
            raise RuntimeError(f"fetch failed with {ErrorCode(response.error_code).name}")
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition_index)
                if parts is None:
                    state = self.partitions.get(tp)
                    partition = m.replica_manager.partitions.get(tp)
                    # a state never sent is newer than this request (LeaderAndIsr re-added the
                    # partition while it was out): the answer, e.g. FENCED_LEADER_EPOCH for the old
                    # epoch, is not its own
                    if state is None or partition is None or state.entry is None:
                        continue
                    entry = (partition, state)
                else:
                    entry = parts.get(tp)
                    if entry is None or m.replica_manager.partitions.get(tp) is not entry[0] \
                            or self.partitions.get(tp) is not entry[1]:
                        continue  # the partition left this fetcher, or was re-added, while the fetch was out
                self.dirty.add(tp)
                log = entry[0].log
                try:
                    self._apply(tp, entry[0], entry[1], p)
                except OSError as exc:  # the log's dir goes offline, with the partitions in it
                    m.replica_manager.handle_log_failure(log, exc)

    def _apply(self, tp: TopicPartition, partition, state: _FetchState, p: Any) -> None:
        log = partition.log
        if partition.is_leader or partition.leader_epoch != state.leader_epoch:
            return  # the role changed while the fetch was out
        code = p.error_code
        if code == ErrorCode.offset_out_of_range:
            self.steady = False
            self._out_of_range(tp, partition, p)
            return
        if code == ErrorCode.offset_moved_to_tiered_storage:
            state.moved_to_tiered = True
            self.steady = False
            return
        if code != ErrorCode.none:
            self.steady = False
            if code in _RETRY_ERRORS:
                state.delayed_until = trio.current_time() + self.manager.backoff_s
            else:
                logger.warning("%s: fetch from broker %d failed with %s", tp, self.leader_id, ErrorCode(code).name)
                state.delayed_until = trio.current_time() + self.manager.backoff_s
            return
        records = p.records
        quota = self.manager.replica_manager.quotas.follower
        if records and quota.is_throttled(tp):  # in sync or not: all throttled traffic counts
            quota.record(len(records))
        if records:
            buf = bytearray(records)
            batches = validate_batches(buf, from_client=False)
            if batches[0][1].base_offset < log.log_end_offset:  # overlap after a retry: skip what we have
                batches = [(pos, h) for pos, h in batches if h.base_offset >= log.log_end_offset]
                if not batches:
                    return
                start = batches[0][0]
                buf = buf[start:]
                batches = [(pos - start, h) for pos, h in batches]
            log.append_as_follower(buf, batches)
        state.in_sync = p.high_watermark <= log.log_end_offset
        partition.update_follower_high_watermark(p.high_watermark)
        if p.log_start_offset > log.log_start_offset:  # DeleteRecords or retention on the leader
            log.maybe_increment_log_start_offset(min(p.log_start_offset, log.high_watermark))

    def _out_of_range(self, tp: TopicPartition, partition, p: Any) -> None:
        """Kafka's rule: behind the leader's log start, restart there; ahead of its end, truncate."""
        log = partition.log
        if p.high_watermark >= 0 and log.log_end_offset > p.high_watermark and p.log_start_offset <= p.high_watermark:
            state_truncate = max(p.high_watermark, log.high_watermark)
            logger.info("%s: fetch offset %d out of range, truncating to %d", tp, log.log_end_offset, state_truncate)
            log.truncate_to(state_truncate)
        elif p.log_start_offset > log.log_end_offset:
            logger.info("%s: behind the leader's log start %d, restarting the log there", tp, p.log_start_offset)
            log.truncate_fully_and_start_at(p.log_start_offset)
        else:
            self.partitions[tp].truncating = True


def truncation_offset(log, leader_epoch: int, leader_end_offset: int) -> tuple[int, bool]:
    """Where a follower's log stops agreeing with its leader's, and whether that is final (Kafka's
    getOffsetTruncationState): when the follower does not know the epoch the leader answered with,
    it truncates to the end of its own largest epoch below it and asks again."""
    if leader_end_offset < 0:
        return min(log.high_watermark, log.log_end_offset), True
    if leader_epoch == UNDEFINED_EPOCH:
        return min(leader_end_offset, log.log_end_offset), True
    our_epoch, our_end = log.end_offset_for_epoch(leader_epoch)
    if our_end < 0:
        return min(log.high_watermark, log.log_end_offset), True
    if our_epoch != leader_epoch:
        return min(our_end, log.log_end_offset), False
    return min(leader_end_offset, our_end, log.log_end_offset), True


class ReplicaFetcherManager:
    def __init__(self, node_id: int, config, replica_manager, open_channel: OpenChannel) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.open_channel = open_channel
        self.max_wait_ms = config.get("replica.fetch.wait.max.ms")
        self.min_bytes = config.get("replica.fetch.min.bytes")
        self.max_bytes = config.get("replica.fetch.response.max.bytes")
        self.partition_max_bytes = config.get("replica.fetch.max.bytes")
        self.backoff_s = config.get("replica.fetch.backoff.ms") / 1000
        self.request_timeout_s = config.get("replica.socket.timeout.ms") / 1000
        self._fetchers: dict[tuple[int, tuple[str, int]], _LeaderFetcher] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def add_partitions(self, partitions: dict[TopicPartition, tuple[int, tuple[str, int] | None]]) -> None:
        self.remove_partitions(list(partitions))
        for tp, (leader_id, endpoint) in partitions.items():
            if endpoint is None:
                logger.warning("%s: no endpoint for leader %d", tp, leader_id)
                continue
            key = (leader_id, endpoint)
            fetcher = self._fetchers.get(key)
            if fetcher is None:
                fetcher = self._fetchers[key] = _LeaderFetcher(self, leader_id, endpoint)
                assert self._nursery is not None, "the fetcher manager is not running"
                self._nursery.start_soon(self._run_fetcher, key, fetcher)
            partition = self.replica_manager.partitions[tp]
            fetcher.partitions[tp] = _FetchState(partition.leader_epoch)
            fetcher.poke()

    def remove_partitions(self, partitions: list[TopicPartition]) -> None:
        for fetcher in self._fetchers.values():
            for tp in partitions:
                if fetcher.partitions.pop(tp, None) is not None:
                    fetcher.steady = False

    async def _run_fetcher(self, key, fetcher: _LeaderFetcher) -> None:
        try:
            await fetcher.run()
        finally:
            if self._fetchers.get(key) is fetcher:
                del self._fetchers[key]

    def statistics(self) -> dict[str, int]:
        return {"fetchers": len(self._fetchers),
                "partitions": sum(len(f.partitions) for f in self._fetchers.values())}
