"""KafkaController: the one broker at a time that runs the cluster through ZooKeeper.

Every broker runs one; the one that creates the ephemeral `/controller` znode is active, bumps
`/controller_epoch` (its fence: brokers refuse requests of an older epoch) and reacts to brokers
coming and going, topics created, grown and deleted, ISR changes asked by leaders (AlterPartition),
controlled shutdowns, and log dirs failing on live brokers (`log_dir_events`). One task consumes a
bounded channel of events; ZooKeeper watches fire on kazoo's threads and only enqueue a coalesced
event key. Decisions come from the pure
functions of `context`; partition states are written conditionally on their znode version, so a
stale controller's writes fail; the brokers learn their roles from LeaderAndIsr, UpdateMetadata
and StopReplica sent in order over one channel per broker.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Callable

import trio

from kbroker.controller import broker_requests as req
from kbroker.controller.broker_queues import BrokerQueues, SendRequest
from kbroker.controller.context import (
    ControllerContext,
    TopicPartition,
    elect_after_failure,
    elect_for_controlled_shutdown,
    elect_on_broker_return,
    new_partition_state,
)
from kbroker.controller.leadership import LeadershipMixin
from kbroker.controller.log_dir_events import LogDirEventsMixin
from kbroker.controller.moves import ReassignmentMixin
from kbroker.errors import ErrorCode
from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.session import ZkSession

logger = logging.getLogger(__name__)


class ControllerMovedError(Exception):
    """This broker is no longer the controller (its epoch was superseded or its session lost)."""


class KafkaController(ReassignmentMixin, LeadershipMixin, LogDirEventsMixin):
    def __init__(self, broker_id: int, session: ZkSession, send_request: SendRequest, *,
                 unclean_leader_election: Callable[[str], bool], auto_leader_rebalance: bool = True,
                 imbalance_check_interval_s: float = 300.0, imbalance_percentage: int = 10,
                 replica_restore_delay_s: float = 0.0, listener: str | None = None) -> None:
        """`listener` is control.plane.listener.name (or the inter-broker listener): the one the
        controller's requests go to."""
        self.broker_id = broker_id
        self.listener = listener
        self.session = session
        self.zk = session.client
        self.send_request = send_request
        self.unclean = unclean_leader_election
        self.auto_leader_rebalance = auto_leader_rebalance
        self.imbalance_check_interval_s = imbalance_check_interval_s
        self.imbalance_percentage = imbalance_percentage
        self.replica_restore_delay_s = replica_restore_delay_s
        self._gone_since: dict[int, float] = {}  # broker -> trio time it was first seen gone
        self.ctx: ControllerContext | None = None
        self.active_controller_id = -1
        self.on_controller_change: Callable[[int], None] = lambda _id: None
        self._events_send, self._events = trio.open_memory_channel[Any](64)
        self._pending: set[str] = set()
        self._modified_topics: set[str] = set()
        self.queues = BrokerQueues(send_request, self.note_broker_response)
        self._init_log_dir_events()

    @property
    def is_active(self) -> bool:
        return self.ctx is not None

    # -- events -------------------------------------------------------------------------------------
    def _enqueue(self, key: str) -> None:
        """Coalesced: a key already waiting is not queued twice (every handler re-reads ZooKeeper)."""
        if key in self._pending:
            return
        self._pending.add(key)
        try:
            self._events_send.send_nowait(key)
        except trio.WouldBlock:  # cannot happen with a handful of distinct keys; never lose one
            self._pending.discard(key)
            logger.error("controller event queue full, dropping %s", key)

    def _watch(self, key: str):
        return self.session.watch(lambda: self._enqueue(key))

    def _topic_watch(self, topic: str):
        def fired() -> None:
            self._modified_topics.add(topic)
            self._enqueue("partitions")
        return self.session.watch(fired)

    async def submit(self, event: tuple) -> Any:
        """A request-driven event (AlterPartition, ControlledShutdown): its answer, once processed."""
        done = trio.Event()
        box: list[Any] = []
        await self._events_send.send((event, box, done))
        await done.wait()
        return box[0]

    def session_lost(self) -> None:
        self._enqueue("resign")

    def elect(self) -> None:
        self._enqueue("elect")

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self.queues.attach(nursery)
            self._enqueue("elect")
            if self.auto_leader_rebalance:
                nursery.start_soon(self._rebalance_timer)
            if self.replica_restore_delay_s > 0:
                nursery.start_soon(self._restore_timer)
            task_status.started()
            async for event in self._events:
                if isinstance(event, str):
                    self._pending.discard(event)
                    await self._handle_key(event)
                else:
                    (kind, *args), box, done = event
                    try:
                        box.append(await self._handle_request(kind, *args))
                    except Exception as exc:  # noqa: BLE001 - the requester gets an error answer
                        logger.exception("controller failed on %s", kind)
                        box.append(exc)
                    done.set()

    async def _handle_key(self, key: str) -> None:
        handlers = {
            "elect": self._elect,
            "resign": self._resign_and_elect,
            "brokers": self._on_broker_change,
            "topics": self._on_topic_change,
            "partitions": self._on_partition_modification,
            "deletions": self._on_topic_deletion,
            "controller_check": self._check_still_controller,
            "rebalance": self._rebalance_leaders,
            "restore": self._restore_replicas,
            "log_dir_events": self._on_log_dir_events,
            "log_dir_answers": self._on_log_dir_answers,
        }
        if key not in ("elect", "resign", "controller_check") and not self.is_active:
            return
        try:
            await handlers[key]()
        except ControllerMovedError as exc:
            logger.info("controller %d resigning: %s", self.broker_id, exc)
            self._resign()
            self._enqueue("elect")
        except zk.ZkError as exc:
            logger.warning("controller event %s failed on ZooKeeper (%s); retrying", key, exc)
            await trio.sleep(0.5)
            if self.is_active or key == "elect":
                self._enqueue(key)
        except Exception:
            logger.exception("controller event %s failed", key)

    async def _handle_request(self, kind: str, *args) -> Any:
        if not self.is_active:
            return ErrorCode.not_controller
        if kind == "alter_partition":
            return await self._alter_partition(*args)
        if kind == "controlled_shutdown":
            return await self._controlled_shutdown(*args)
        if kind == "alter_reassignments":
            return await self._alter_reassignments(*args)
        if kind == "list_reassignments":
            return self.reassignments(*args)
        if kind == "elect_leaders":
            return await self._elect_leaders(*args)
        raise ValueError(kind)

    # -- election -----------------------------------------------------------------------------------
    async def _elect(self) -> None:
        if self.is_active:
            return
        try:
            await self.session.call(self.zk.create, zk.CONTROLLER, zk.encode_controller(self.broker_id), ephemeral=True)
        except zk.NodeExistsError:
            await self._follow_controller()
            return
        try:
            await self._become_controller()
        except zk.BadVersionError:
            logger.info("broker %d lost the controller epoch race", self.broker_id)
            await self._give_up_controller_znode()
            self._resign()
            await self._follow_controller()

    async def _follow_controller(self) -> None:
        """Watch /controller: its deletion means a new election."""
        stat = await self.session.call(self.zk.exists, zk.CONTROLLER, self._watch("elect"))
        if stat is None:
            self._enqueue("elect")
            return
        try:
            data, _ = await self.session.call(self.zk.get, zk.CONTROLLER)
        except zk.NoNodeError:
            self._enqueue("elect")
            return
        self._set_active_controller(zk.decode_controller(data))

    def _set_active_controller(self, controller_id: int) -> None:
        if controller_id != self.active_controller_id:
            self.active_controller_id = controller_id
            self.on_controller_change(controller_id)

    async def _give_up_controller_znode(self) -> None:
        try:
            data, stat = await self.session.call(self.zk.get, zk.CONTROLLER)
            if zk.decode_controller(data) == self.broker_id:
                await self.session.call(self.zk.delete, zk.CONTROLLER, stat.version)
        except zk.ZkError:
            pass

    async def _check_still_controller(self) -> None:
        """/controller changed: if it is no longer ours, stop acting and follow the new one."""
        stat = await self.session.call(self.zk.exists, zk.CONTROLLER, self._watch("controller_check"))
        owner = -1
        if stat is not None:
            try:
                owner = zk.decode_controller((await self.session.call(self.zk.get, zk.CONTROLLER))[0])
            except zk.NoNodeError:
                pass
        if self.is_active and owner == self.broker_id:
            return
        self._resign()
        await self._elect()

    async def _resign_and_elect(self) -> None:
        self._resign()
        self.active_controller_id = -1
        await self._elect()

    def _resign(self) -> None:
        if self.ctx is not None:
            logger.info("broker %d resigns as controller (epoch %d)", self.broker_id, self.ctx.epoch)
        self.ctx = None
        self._gone_since.clear()
        self._dir_answers.clear()
        self.queues.close_all()

    async def _become_controller(self) -> None:
        epoch, version = await self._bump_controller_epoch()
        ctx = ControllerContext(epoch, version)
        self.ctx = ctx
        logger.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        self._set_active_controller(self.broker_id)
        await self.session.call(self.zk.exists, zk.CONTROLLER, self._watch("controller_check"))
        await self._clear_log_dir_events()
        ctx.live_brokers = await self._read_brokers()
        for broker in ctx.live_brokers.values():
            self.queues.open(broker)
        topics = await self.session.call(self.zk.children, zk.BROKER_TOPICS, self._watch("topics"))
        await self._read_topics(topics)
        await self._read_states(ctx.all_partitions())
        # partitions that never got a state, or lost their leader or ISR members while no controller ran
        changed = await self._write_new_states(
            [tp for tp in ctx.all_partitions() if tp not in ctx.states])
        live, electable = set(ctx.live_brokers), ctx.electable()
        repaired = {tp: elect_after_failure(s, ctx.replicas(tp), live, electable, self.unclean(tp[0]), ctx.epoch)
                    for tp, s in ctx.states.items()}
        changed |= await self._write_states({tp: s for tp, s in repaired.items() if s is not None})
        for broker in ctx.live_brokers.values():
            self._send(broker, req.UPDATE_METADATA,
                       req.update_metadata(ctx, self.broker_id, broker, ctx.all_partitions(), full=True))
            mine = ctx.partitions_on(broker.broker_id)
            if mine:
                self._send(broker, req.LEADER_AND_ISR, req.leader_and_isr(ctx, self.broker_id, broker, mine))
        await self._on_topic_deletion()
        await self._complete_moves(list(self.reassignments()))
        self._note_absent_replicas()
        logger.info("controller %d ready: %d brokers, %d topics, %d partitions (%d states changed)", self.broker_id,
                    len(ctx.live_brokers), len(ctx.topics), len(ctx.states), len(changed))

    async def _bump_controller_epoch(self) -> tuple[int, int]:
        try:
            data, stat = await self.session.call(self.zk.get, zk.CONTROLLER_EPOCH)
        except zk.NoNodeError:
            try:
                await self.session.call(self.zk.create, zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(1))
                return 1, 0
            except zk.NodeExistsError:
                raise zk.BadVersionError("controller epoch created concurrently") from None
        epoch = zk.decode_controller_epoch(data) + 1
        new = await self.session.call(self.zk.set, zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(epoch), stat.version)
        return epoch, new.version

    # -- reading ZooKeeper -------------------------------------------------------------------------
    async def _read_brokers(self) -> dict[int, zk.BrokerRegistration]:
        ids = await self.session.call(self.zk.children, zk.BROKER_IDS, self._watch("brokers"))
        ids = sorted(int(i) for i in ids if i.isdigit())
        results = await self.session.call(self.zk.get_many, [zk.broker_path(i) for i in ids])
        brokers = {}
        for broker_id, result in zip(ids, results):
            if result is not None:
                data, stat = result
                brokers[broker_id] = zk.decode_broker(broker_id, data, stat.czxid, self.listener)
        # (no side effect: a change read while no broker was live, e.g. the controller's own
        # registration after its election, must still be seen as brokers joining)
        return brokers

    async def _read_topics(self, topics: list[str]) -> list[str]:
        ctx = self._ctx()
        results = await self.session.call(self._get_with_watches, topics)
        read = []
        for topic, result in zip(topics, results):
            if result is not None:
                ctx.topics[topic] = zk.decode_topic(topic, result[0])
                read.append(topic)
        return read

    def _get_with_watches(self, topics: list[str]) -> list:
        """In the worker thread: each topic's assignment, with a data watch for partition additions."""
        out = []
        for topic in topics:
            try:
                out.append(self.zk.get(zk.topic_path(topic), self._topic_watch(topic)))
            except zk.NoNodeError:
                out.append(None)
        return out

    async def _read_states(self, partitions: list[TopicPartition]) -> None:
        ctx = self._ctx()
        results = await self.session.call(self.zk.get_many, [zk.partition_state_path(t, p) for t, p in partitions])
        for tp, result in zip(partitions, results):
            if result is not None:
                ctx.states[tp] = zk.decode_partition_state(result[0], result[1].version)

    # -- writing partition states ------------------------------------------------------------------
    def _ctx(self) -> ControllerContext:
        if self.ctx is None:
            raise ControllerMovedError("not the controller")
        return self.ctx

    async def _write_new_states(self, partitions: list[TopicPartition]) -> set[TopicPartition]:
        ctx = self._ctx()
        planned = {}
        for tp in partitions:
            state = new_partition_state(ctx.replicas(tp), ctx.electable(), ctx.epoch)
            if state is not None:
                planned[tp] = state
        if not planned:
            return set()
        tps = list(planned)
        results = await self.session.call(
            self.zk.create_many, [(zk.partition_state_path(t, p), zk.encode_partition_state(planned[(t, p)])) for t, p in tps])
        done = set()
        for tp, result in zip(tps, results):
            if isinstance(result, zk.NodeExistsError):
                await self._read_states([tp])  # someone (an earlier controller) did it: take theirs
            elif isinstance(result, zk.ZkError):
                logger.warning("could not create the state of %s-%d: %s", tp[0], tp[1], result)
            else:
                ctx.states[tp] = planned[tp].with_(partition_epoch=0)
                done.add(tp)
        return done

    async def _write_states(self, planned: dict[TopicPartition, zk.LeaderAndIsr]) -> set[TopicPartition]:
        """Conditional writes on each state's znode version; a lost race means a newer controller."""
        ctx = self._ctx()
        if not planned:
            return set()
        tps = list(planned)
        writes = [(zk.partition_state_path(t, p), zk.encode_partition_state(planned[(t, p)]),
                   ctx.states[(t, p)].partition_epoch) for t, p in tps]
        results = await self.session.call(self.zk.set_many, writes)
        done = set()
        for tp, result in zip(tps, results):
            if isinstance(result, zk.BadVersionError):
                if await self._controller_epoch_moved():
                    raise ControllerMovedError("the controller epoch moved on")
                await self._read_states([tp])
            elif isinstance(result, zk.ZkError):
                logger.warning("could not write the state of %s-%d: %s", tp[0], tp[1], result)
            else:
                ctx.states[tp] = planned[tp].with_(partition_epoch=result.version)
                done.add(tp)
        return done

    async def _write_topic(self, assignment: zk.TopicAssignment) -> None:
        """The topic znode, fenced by the controller epoch: a deposed controller's write fails."""
        ctx = self._ctx()
        try:
            await self.session.call(self.zk.set_checked, zk.topic_path(assignment.topic), zk.encode_topic(assignment),
                                    zk.CONTROLLER_EPOCH, ctx.epoch_zk_version)
        except zk.BadVersionError:
            raise ControllerMovedError("the controller epoch moved on") from None

    async def _controller_epoch_moved(self) -> bool:
        ctx = self._ctx()
        try:
            data, _stat = await self.session.call(self.zk.get, zk.CONTROLLER_EPOCH)
        except zk.NoNodeError:
            return True
        return zk.decode_controller_epoch(data) != ctx.epoch

    # -- telling the brokers ------------------------------------------------------------------------
    def _send(self, broker: zk.BrokerRegistration, api_key: int, body: dict) -> None:
        self.queues.send(broker, api_key, body)

    def _announce(self, changed: set[TopicPartition], extra_leader_and_isr: set[int] = frozenset()) -> None:
        """LeaderAndIsr to the live replicas of `changed`, UpdateMetadata of them to every broker."""
        ctx = self._ctx()
        if not changed:
            return
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp in changed:
            for replica in ctx.replicas(tp):
                if replica in ctx.live_brokers:
                    by_broker.setdefault(replica, []).append(tp)
        for broker_id, tps in by_broker.items():
            broker = ctx.live_brokers[broker_id]
            self._send(broker, req.LEADER_AND_ISR, req.leader_and_isr(ctx, self.broker_id, broker, tps))
        for broker in ctx.live_brokers.values():
            self._send(broker, req.UPDATE_METADATA, req.update_metadata(ctx, self.broker_id, broker, changed))

    # -- brokers coming and going -----------------------------------------------------------------
    async def _on_broker_change(self) -> None:
        ctx = self._ctx()
        current = await self._read_brokers()
        bounced = {i for i, b in current.items() if i in ctx.live_brokers and ctx.live_brokers[i].epoch != b.epoch}
        dead = (set(ctx.live_brokers) - set(current)) | bounced
        new = (set(current) - set(ctx.live_brokers)) | bounced
        if dead:
            logger.info("controller: brokers %s left", sorted(dead))
            for broker_id in dead:
                ctx.live_brokers.pop(broker_id, None)
                ctx.shutting_down.discard(broker_id)
                ctx.replicas_on_offline_dirs.pop(broker_id, None)  # a restarted broker answers afresh
                self.queues.close(broker_id)
            await self._on_brokers_failure(dead)
        if new:
            logger.info("controller: brokers %s joined", sorted(new))
            for broker_id in new:
                ctx.live_brokers[broker_id] = current[broker_id]
                self.queues.open(current[broker_id])
            await self._on_brokers_startup(new)
        self._note_brokers_gone(dead - new)
        self._note_brokers_back(new)
        if dead or new:
            await self._complete_moves(list(self.reassignments()))

    async def _on_brokers_failure(self, dead: set[int]) -> None:
        ctx = self._ctx()
        planned = {}
        for tp, state in ctx.states.items():
            if state.leader in dead or dead & set(state.isr):
                new = elect_after_failure(state, ctx.replicas(tp), ctx.live_for(tp), ctx.electable_for(tp),
                                          self.unclean(tp[0]), ctx.epoch)
                if new is not None:
                    planned[tp] = new
        changed = await self._write_states(planned)
        affected = {tp for tp in ctx.all_partitions() if dead & set(ctx.replicas(tp))}
        self._announce(changed)
        # every broker learns the new broker list and the offline replicas
        for broker in ctx.live_brokers.values():
            self._send(broker, req.UPDATE_METADATA, req.update_metadata(ctx, self.broker_id, broker, affected - changed))

    async def _on_brokers_startup(self, new: set[int]) -> None:
        ctx = self._ctx()
        for broker_id in new:  # the newcomer gets everything; the others the new broker list
            broker = ctx.live_brokers[broker_id]
            self._send(broker, req.UPDATE_METADATA,
                       req.update_metadata(ctx, self.broker_id, broker, ctx.all_partitions(), full=True))
        hosted = {tp for tp in ctx.all_partitions() if new & set(ctx.replicas(tp))}
        for broker in ctx.live_brokers.values():
            if broker.broker_id not in new:
                self._send(broker, req.UPDATE_METADATA, req.update_metadata(ctx, self.broker_id, broker, hosted))
        fresh = [tp for tp in hosted if tp not in ctx.states]
        changed = await self._write_new_states(fresh)
        planned = {}
        for tp in hosted:
            if tp in ctx.states and tp not in changed:
                new_state = elect_on_broker_return(ctx.states[tp], ctx.replicas(tp), ctx.live_for(tp),
                                                   ctx.electable_for(tp), self.unclean(tp[0]), ctx.epoch)
                if new_state is not None:
                    planned[tp] = new_state
        changed |= await self._write_states(planned)
        self._announce(changed)
        for broker_id in new:  # its role in every partition it hosts, led or followed
            broker = ctx.live_brokers[broker_id]
            mine = [tp for tp in hosted - changed if broker_id in ctx.replicas(tp) and tp in ctx.states]
            if mine:
                self._send(broker, req.LEADER_AND_ISR, req.leader_and_isr(ctx, self.broker_id, broker, mine))

    # -- topics -------------------------------------------------------------------------------------
    async def _on_topic_change(self) -> None:
        ctx = self._ctx()
        topics = await self.session.call(self.zk.children, zk.BROKER_TOPICS, self._watch("topics"))
        new = [t for t in topics if t not in ctx.topics]
        gone = [t for t in ctx.topics if t not in topics]
        for topic in gone:  # removed behind our back: forget it
            self._forget_topic(topic)
        if new:
            await self._read_topics(new)
            await self._on_new_partitions(ctx.partitions_of(new))

    async def _on_new_partitions(self, partitions: list[TopicPartition]) -> None:
        ctx = self._ctx()
        changed = await self._write_new_states([tp for tp in partitions if tp not in ctx.states])
        offline = set(partitions) - changed
        self._announce(changed)
        if offline:  # no live replica yet: clients still see the partitions, leaderless
            for broker in ctx.live_brokers.values():
                self._send(broker, req.UPDATE_METADATA, req.update_metadata(ctx, self.broker_id, broker, offline))
        logger.info("controller: %d new partitions online, %d offline", len(changed), len(offline))

    async def _on_partition_modification(self) -> None:
        ctx = self._ctx()
        topics, self._modified_topics = self._modified_topics, set()
        known = [t for t in topics if t in ctx.topics]
        before = {t: set(ctx.topics[t].partitions) for t in known}
        active_before = {t: ctx.topics[t].active for t in known}
        await self._read_topics(known)
        added = [(t, p) for t in known if t in ctx.topics for p in sorted(set(ctx.topics[t].partitions) - before[t])]
        if added:
            await self._on_new_partitions(added)
        for topic in [t for t in known if t in ctx.topics and ctx.topics[t].removable]:
            await self._remove_retired(topic)
        shrunk = [t for t in known if t in ctx.topics and ctx.topics[t].active != active_before[t]
                  and ctx.topics[t].active is not None]
        if shrunk:  # a partition decrease: every broker stops advertising (and appending to) the retiring ones
            retiring = [tp for tp in ctx.partitions_of(shrunk) if ctx.topics[tp[0]].is_retiring(tp[1])]
            logger.info("controller: partitions %s retire", ", ".join(f"{t}-{p}" for t, p in retiring[:10]))
            for broker in ctx.live_brokers.values():
                self._send(broker, req.UPDATE_METADATA, req.update_metadata(ctx, self.broker_id, broker, retiring))

    async def _remove_retired(self, topic: str) -> None:
        """A decrease's retired partitions go once every one of them is drained and empty (their
        leaders list them as removable): replicas stopped and deleted, state znodes removed, the
        topic znode back to a plain assignment of the partitions that remain."""
        ctx = self._ctx()
        assignment = ctx.topics[topic]
        retired = [p for p in assignment.partitions if assignment.is_retiring(p)]
        if not retired or not set(retired) <= set(assignment.removable):
            return
        for p in retired:
            self._stop_replicas((topic, p), ctx.replicas((topic, p)))
        keep = {p: r for p, r in assignment.partitions.items() if p not in retired}
        await self._write_topic(replace(assignment, partitions=keep, active=None, removable=(),
                                        adding={p: r for p, r in assignment.adding.items() if p in keep},
                                        removing={p: r for p, r in assignment.removing.items() if p in keep}))
        ctx.topics[topic] = replace(assignment, partitions=keep, active=None, removable=())
        for p in retired:
            ctx.states.pop((topic, p), None)
            try:
                await self.session.call(self.zk.delete, zk.partition_path(topic, p), recursive=True)
            except zk.NoNodeError:
                pass
        logger.info("controller: retired partitions %s of %s removed", retired, topic)

    def _forget_topic(self, topic: str) -> None:
        ctx = self._ctx()
        ctx.topics.pop(topic, None)
        for tp in [tp for tp in ctx.states if tp[0] == topic]:
            del ctx.states[tp]

    async def _on_topic_deletion(self) -> None:
        ctx = self._ctx()
        names = await self.session.call(self.zk.children, zk.DELETE_TOPICS, self._watch("deletions"))
        for topic in names:
            if topic in ctx.topics:
                partitions = ctx.partitions_of([topic])
                for broker in ctx.live_brokers.values():
                    self._send(broker, req.UPDATE_METADATA,
                               req.update_metadata(ctx, self.broker_id, broker, partitions, deleting=True))
                by_broker: dict[int, list[TopicPartition]] = {}
                for tp in partitions:
                    for replica in ctx.replicas(tp):
                        by_broker.setdefault(replica, []).append(tp)
                for broker_id, tps in by_broker.items():
                    broker = ctx.live_brokers.get(broker_id)
                    if broker is not None:
                        self._send(broker, req.STOP_REPLICA, req.stop_replica(ctx, self.broker_id, broker, tps, True))
                self._forget_topic(topic)
                for path in (zk.topic_path(topic), zk.topic_config_path(topic)):
                    try:
                        await self.session.call(self.zk.delete, path, recursive=True)
                    except zk.NoNodeError:
                        pass
                logger.info("controller: deleted topic %s", topic)
            try:
                await self.session.call(self.zk.delete, zk.delete_topic_path(topic))
            except zk.NoNodeError:
                pass

    # -- requests from brokers --------------------------------------------------------------------
    async def _alter_partition(self, broker_id: int, broker_epoch: int,
                               changes: list[tuple[str, int, int, int, list[int]]]) -> dict:
        """ISR changes asked by a leader: (topic, partition, leader_epoch, partition_epoch, new_isr) ->
        per partition (error, state)."""
        ctx = self._ctx()
        answers: dict[TopicPartition, tuple[ErrorCode, zk.LeaderAndIsr | None]] = {}
        planned = {}
        for topic, partition, leader_epoch, partition_epoch, new_isr in changes:
            tp = (topic, partition)
            state = ctx.states.get(tp)
            if state is None:
                answers[tp] = (ErrorCode.unknown_topic_or_partition, None)
            elif state.leader != broker_id:
                answers[tp] = (ErrorCode.not_leader_or_follower, state)
            elif leader_epoch < state.leader_epoch:
                answers[tp] = (ErrorCode.fenced_leader_epoch, state)
            elif leader_epoch > state.leader_epoch:
                answers[tp] = (ErrorCode.unknown_leader_epoch, state)
            elif partition_epoch != state.partition_epoch:
                answers[tp] = (ErrorCode.invalid_update_version, state)
            elif not new_isr or any(r not in ctx.replicas(tp) for r in new_isr) or broker_id not in new_isr:
                answers[tp] = (ErrorCode.invalid_request, state)
            elif any(not ctx.is_replica_online(r, tp) or r in ctx.shutting_down for r in set(new_isr) - set(state.isr)):
                answers[tp] = (ErrorCode.ineligible_replica, state)
            elif tuple(new_isr) == state.isr:
                answers[tp] = (ErrorCode.none, state)
            else:
                planned[tp] = state.with_(isr=tuple(new_isr), controller_epoch=ctx.epoch)
        changed = await self._write_states(planned)
        for tp in planned:
            answers[tp] = (ErrorCode.none, ctx.states[tp]) if tp in changed else \
                (ErrorCode.invalid_update_version, ctx.states.get(tp))
        if changed:
            for broker in ctx.live_brokers.values():
                self._send(broker, req.UPDATE_METADATA, req.update_metadata(ctx, self.broker_id, broker, changed))
            await self._complete_moves(changed)
        return answers

    async def _controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[TopicPartition]]:
        ctx = self._ctx()
        broker = ctx.live_brokers.get(broker_id)
        if broker is None:
            return ErrorCode.broker_not_available, []
        if broker_epoch not in (-1, broker.epoch):
            return ErrorCode.stale_broker_epoch, []
        ctx.shutting_down.add(broker_id)
        led_before = set(ctx.partitions_led_by(broker_id))
        planned = {}
        for tp in ctx.partitions_on(broker_id):
            state = ctx.states.get(tp)
            if state is None or len(ctx.replicas(tp)) < 2:
                continue
            new = elect_for_controlled_shutdown(state, ctx.replicas(tp), broker_id,
                                                ctx.electable_for(tp) | {broker_id}, ctx.epoch)
            if new is not None:
                planned[tp] = new
        changed = await self._write_states(planned)
        self._announce(changed)
        # Kafka's rule: only replicas it followed stop; those it led stay, as followers, so it can
        # still name the new leader to a producer that has not heard yet (KIP-951)
        followed = [tp for tp in changed if ctx.states[tp].leader != broker_id and tp not in led_before]
        if followed:
            self._send(broker, req.STOP_REPLICA, req.stop_replica(ctx, self.broker_id, broker, followed, False))
        remaining = [tp for tp in ctx.partitions_led_by(broker_id) if len(ctx.replicas(tp)) > 1]
        logger.info("controller: controlled shutdown of broker %d moved %d partitions, %d remain", broker_id,
                    len(changed), len(remaining))
        return ErrorCode.none, remaining

