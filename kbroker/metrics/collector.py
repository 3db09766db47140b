"""The Prometheus collector: at scrape time it reads the broker's counters (stats.py) and its
state — logs, ISRs, the controller, the group coordinator's committed offsets — and yields metric
families named as the Kafka JMX exporter's common config renders Kafka's MBeans
(`kafka_server_brokertopicmetrics_bytesin_total{topic}`, ...), consumer group lag as
kafka-exporter names it (`kafka_consumergroup_lag`), kbroker's own `kbroker_*` series where Kafka
has none (per consumer-protocol group: rebalances, epochs), and prometheus_client's process metrics.

Nothing here runs on the request path. The broker is read duck-typed (`replica_manager`,
`group_coordinator`, `controller`, `stats`), so tests hand it fakes and this package imports no
subsystem (import-linter).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.utils import floatToGoString

from kbroker.metrics.stats import BrokerStats


class BrokerCollector:
    """A prometheus_client custom collector of one broker. `connections()` is the number of open
    client connections (the server knows it); `listener` names the listener they came through."""

    def __init__(self, broker: Any, stats: BrokerStats, connections: Callable[[], int],
                 listener: str = "PLAINTEXT") -> None:
        self.broker = broker
        self.stats = stats
        self.connections = connections
        self.listener = listener

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_metrics()
        yield from self._request_metrics()
        rm = self.broker.replica_manager
        partitions = {(tp[0], tp[1]): p for tp, p in list(rm.partitions.items())}
        yield from self._purgatories(rm)
        yield from self._fetch_sessions()
        yield from self._logs(partitions)
        yield from self._replica_manager(partitions)
        yield from self._controller()
        yield from self._groups(partitions)
        yield from self._consumer_groups()
        yield from self._share_groups()
        yield from self._authorizer()
        connections = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                        "Open client connections.", labels=["listener"])
        connections.add_metric([self.listener], self.connections())
        yield connections

    # -- counted on the request path ---------------------------------------------------------------
    def _topic_metrics(self) -> Iterator[Metric]:
        families = [
            ("bytesin", "Bytes of record batches produced by clients.", "bytes_in"),
            ("bytesout", "Bytes of record batches sent to consumers (followers excluded).", "bytes_out"),
            ("messagesin", "Records produced by clients.", "messages_in"),
        ]
        topics = sorted(self.stats.topics.items())
        for name, doc, attribute in families:
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"])
            for topic, stats in topics:
                family.add_metric([topic], getattr(stats, attribute))
            yield family

    def _request_metrics(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests answered, per API "
                                       "and version.", labels=["request", "version"])
        latency = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems", "Milliseconds from a "
                                        "request's frame read to its response encoded (long polls and acks=all "
                                        "waits included).", labels=["request"])
        for name, stats in sorted(self.stats.requests.items()):
            for version, count in sorted(stats.per_version.items()):
                requests.add_metric([name, str(version)], count)
            latency.add_metric([name], [(floatToGoString(b), n) for b, n in stats.cumulative_buckets()], stats.sum_ms)
        yield requests
        yield latency

    # -- read from the broker's state at scrape time -----------------------------------------------
    @staticmethod
    def _purgatories(rm: Any) -> Iterator[Metric]:
        family = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize", "Requests waiting: "
                                   "Produce, appends for their ISR (acks=all, offset commits, markers); Fetch, for "
                                   "min.bytes.",
                                   labels=["delayedoperation"])
        family.add_metric(["Produce"], rm.delayed_produces)
        family.add_metric(["Fetch"], rm.delayed_fetches)
        yield family

    def _fetch_sessions(self) -> Iterator[Metric]:
        """Kafka's FetchSessionCache metrics (kafka.server:type=FetchSessionCache), eviction as a
        counter since start."""
        cache = getattr(self.broker, "fetch_sessions", None)
        if cache is None:
            return
        stats = cache.statistics()
        prefix = "kafka_server_fetchsessioncache"
        for name, doc, value in (
                ("numincrementalfetchsessions", "Incremental fetch sessions cached (KIP-227).", stats["sessions"]),
                ("numincrementalfetchpartitionscached", "Partitions held by the cached fetch sessions.",
                 stats["partitions_cached"])):
            family = GaugeMetricFamily(f"{prefix}_{name}", doc)
            family.add_metric([], value)
            yield family
        evictions = CounterMetricFamily(f"{prefix}_incrementalfetchsessionevictions",
                                        "Fetch sessions evicted to make room for new ones.")
        evictions.add_metric([], stats["evictions"])
        yield evictions
        requests = CounterMetricFamily("kbroker_fetch_session_requests", "Fetch requests by what their session "
                                       "metadata made of them: sessionless, full (a session asked for), "
                                       "incremental, or a session error (kbroker).", labels=["kind"])
        for kind in ("sessionless", "full", "incremental", "error"):
            requests.add_metric([kind], stats[f"{kind}_requests"])
        yield requests

    @staticmethod
    def _logs(partitions: dict) -> Iterator[Metric]:
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log on this broker.",
                                 labels=["topic", "partition"])
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "The log end offset of the partition's log on "
                                "this broker.", labels=["topic", "partition"])
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "The log start offset of the partition's log "
                                  "on this broker.", labels=["topic", "partition"])
        for (topic, index), partition in sorted(partitions.items()):
            labels = [topic, str(index)]
            log = partition.log
            size.add_metric(labels, log.size_in_bytes)
            end.add_metric(labels, log.log_end_offset)
            start.add_metric(labels, log.log_start_offset)
        yield from (size, end, start)

    @staticmethod
    def _replica_manager(partitions: dict) -> Iterator[Metric]:
        led = [p for p in partitions.values() if p.is_leader]
        under = sum(1 for p in led if len(p.isr) < len(p.replicas))
        under_min = sum(1 for p in led if len(p.isr) < p.min_insync_replicas)
        for name, doc, value in (
                ("underreplicatedpartitions", "Partitions led here whose ISR is smaller than their replica set.", under),
                ("underminisrpartitioncount", "Partitions led here whose ISR is below min.insync.replicas.",
                 under_min),
                ("partitioncount", "Partition replicas on this broker.", len(partitions)),
                ("leadercount", "Partitions led by this broker.", len(led))):
            family = GaugeMetricFamily(f"kafka_server_replicamanager_{name}", doc)
            family.add_metric([], value)
            yield family

    def _controller(self) -> Iterator[Metric]:
        """The single node is its own controller; in a cluster only the active controller counts 1
        and reports offline partitions (as Kafka's, the others report 0)."""
        active, offline = 1, 0
        if self.broker.cluster:
            controller = self.broker.controller
            ctx = controller.ctx if controller is not None else None
            active = 1 if ctx is not None else 0
            if ctx is not None:
                offline = sum(1 for tp in list(ctx.states) if not ctx.is_online(tp))
        for name, doc, value in (
                ("activecontrollercount", "1 on the active controller, 0 elsewhere.", active),
                ("offlinepartitionscount", "Partitions without a live leader (reported by the active controller).",
                 offline)):
            family = GaugeMetricFamily(f"kafka_controller_kafkacontroller_{name}", doc)
            family.add_metric([], value)
            yield family

    def _authorizer(self) -> Iterator[Metric]:
        """KIP-608's authorizer metrics (`kafka.server:type=kafka.security.authorizer.metrics`,
        authorization-allowed/denied/request-rate-per-minute, acls-total-count) as counters of the
        checks made since start, and the ACL count: only with an ACL authorizer configured."""
        authorizer = getattr(self.broker, "authorizer", None)
        counts = getattr(authorizer, "counts", None)
        if counts is None:
            return
        prefix = "kafka_server_authorizer_metrics"
        for name, doc, value in (
                ("authorization_allowed_rate", "Authorization checks allowed (a request makes one per resource "
                 "and operation it needs).", counts.allowed),
                ("authorization_denied_rate", "Authorization checks denied.", counts.denied),
                ("authorization_request_rate", "Authorization checks made (allowed + denied).",
                 counts.allowed + counts.denied)):
            family = CounterMetricFamily(f"{prefix}_{name}", doc)
            family.add_metric([], value)
            yield family
        acls = GaugeMetricFamily(f"{prefix}_acls_total_count", "ACLs the authorizer holds.")
        acls.add_metric([], getattr(authorizer, "acl_count", 0))
        yield acls

    def _groups(self, partitions: dict) -> Iterator[Metric]:
        """Committed offsets of the groups coordinated here, and their lag behind the high
        watermark of the partitions this broker holds a replica of."""
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "A group's committed offset.", labels=labels)
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus a group's committed offset.",
                                labels=labels)
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of a group.", labels=["consumergroup"])
        for group_id, group in sorted(self.broker.group_coordinator.groups.items()):
            consumer = getattr(group, "consumer", None)  # a group is one type at a time
            members.add_metric([group_id], len(group.members if consumer is None else consumer.members))
            for (topic, index), committed in sorted(group.offsets.items()):
                values = [group_id, topic, str(index)]
                current.add_metric(values, committed.offset)
                partition = partitions.get((topic, index))
                if partition is not None:
                    lag.add_metric(values, max(partition.high_watermark - committed.offset, 0))
        yield from (current, lag, members)


    def _consumer_groups(self) -> Iterator[Metric]:
        """The consumer-protocol (KIP-848) groups coordinated here: Kafka's broker-wide
        consumer-group-rebalance-count (GroupCoordinatorMetrics), and kbroker's own per-group series:
        rebalances, members, the group epoch and how far the group is from its assignment. A group's
        series go when it is deleted or another broker coordinates it (as the kafka_consumergroup_*
        series do)."""
        coordinator = self.broker.group_coordinator
        total = CounterMetricFamily(
            "kafka_server_group_coordinator_metrics_consumer_group_rebalance_count",
            "Consumer-protocol group rebalances (group epoch bumps) this coordinator made since it started.")
        total.add_metric([], getattr(coordinator, "consumer_rebalances_total", 0))
        yield total
        counts = getattr(coordinator, "consumer_rebalances", {})
        rebalances = CounterMetricFamily("kbroker_consumer_group_rebalances", "Rebalances (group epoch bumps) "
                                         "of a consumer-protocol group this coordinator made since it took the "
                                         "group over.", labels=["group"])
        members = GaugeMetricFamily("kbroker_consumer_group_members", "Members of a consumer-protocol group.",
                                    labels=["group"])
        epoch = GaugeMetricFamily("kbroker_consumer_group_epoch", "A consumer-protocol group's epoch.",
                                  labels=["group"])
        lag = GaugeMetricFamily("kbroker_consumer_group_assignment_epoch_lag", "Group epoch minus assignment "
                                "(target) epoch, plus the members whose epoch is below the assignment epoch: 0 "
                                "when every member has reconciled to the current assignment.", labels=["group"])
        for group_id, group in sorted(coordinator.groups.items()):
            state = getattr(group, "consumer", None)
            if state is None or state.deleted:
                continue
            rebalances.add_metric([group_id], counts.get(group_id, 0))
            members.add_metric([group_id], len(state.members))
            epoch.add_metric([group_id], state.epoch)
            lag.add_metric([group_id], assignment_epoch_lag(state))
        yield from (rebalances, members, epoch, lag)


    def _share_groups(self) -> Iterator[Metric]:
        """The share-partitions this broker leads (KIP-932): what happened to their records, per
        share group, topic and partition (acquired, accepted, released, rejected, archived, renewed,
        lock expirations), the records in flight by state, and the lag — records not yet
        delivery-complete — for autoscalers sizing a consumer pool."""
        manager = getattr(self.broker, "share_manager", None)
        if manager is None:
            return
        labels = ["group", "topic", "partition"]
        records = CounterMetricFamily("kbroker_share_group_records", "Records of a share-partition by what "
                                      "happened to them: acquired, accepted, released, rejected, renewed "
                                      "(acknowledged so), archived, expired (a lock timed out), "
                                      "member_released (its member left).", labels=[*labels, "event"])
        for (group, topic, partition, kind), n in sorted(manager.counts.items()):
            records.add_metric([group, topic, str(partition), kind], n)
        in_flight = GaugeMetricFamily("kbroker_share_group_in_flight_records", "Records in a share-partition's "
                                      "in-flight window, by state.", labels=[*labels, "state"])
        lag = GaugeMetricFamily("kbroker_share_group_lag", "Records of a share-partition not yet "
                                "delivery-complete (acknowledged or archived), up to the high watermark.",
                                labels=labels)
        for (group, tp), sp in sorted(manager.partitions.items(), key=lambda kv: (kv[0][0], kv[0][1].topic,
                                                                                   kv[0][1].partition)):
            key = [group, tp.topic, str(tp.partition)]
            for state, n in sp.counts()._asdict().items():
                in_flight.add_metric([*key, state], n)
            value = manager.lag(group, tp)
            if value is not None:
                lag.add_metric(key, value)
        yield from (records, in_flight, lag)


def assignment_epoch_lag(state: Any) -> int:
    """How far a consumer-protocol group is from its assignment: the group epochs the target
    assignment has not caught up with, plus the members not yet at the assignment epoch."""
    behind = sum(1 for m in list(state.members.values()) if m.current.member_epoch < state.assignment_epoch)
    return max(state.epoch - state.assignment_epoch, 0) + behind


def build_registry(broker: Any, stats: BrokerStats, connections: Callable[[], int],
                   listener: str = "PLAINTEXT", *, process: bool = True) -> CollectorRegistry:
    """The broker's registry: its collector and, unless `process` is false, prometheus_client's
    ProcessCollector (process_open_fds, process_resident_memory_bytes, CPU seconds, ...)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, stats, connections, listener))
    if process:
        ProcessCollector(registry=registry)
    return registry


class _Collected:
    """Metric families already collected, as generate_latest wants them (anything with collect())."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def collect(registry: CollectorRegistry) -> list[Metric]:
    """Every family's samples, read now: where the broker's state is (the event loop)."""
    return list(registry.collect())


def encode(families: list[Metric]) -> bytes:
    """The scrape body, Prometheus text format 0.0.4, from collected families: touches nothing of
    the broker, so it may run in another thread."""
    return generate_latest(_Collected(families))


def render(registry: CollectorRegistry) -> bytes:
    return encode(collect(registry))


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
