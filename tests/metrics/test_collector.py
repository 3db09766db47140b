"""The collector against fake brokers: Kafka's metric names and labels, the hot path's counters
rendered as Prometheus counters and histograms, and the state read at scrape time (logs, ISR
health, controller, group lag) — parsed back with prometheus_client's own parser."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from kbroker.metrics.collector import build_registry, render
from kbroker.metrics.stats import LATENCY_BUCKETS_MS, BrokerStats


def _partition(*, leader=True, isr=(0,), replicas=(0,), min_isr=1, size=0, end=0, start=0, hw=None):
    log = SimpleNamespace(size_in_bytes=size, log_end_offset=end, log_start_offset=start)
    return SimpleNamespace(is_leader=leader, isr=list(isr), replicas=list(replicas), min_insync_replicas=min_isr,
                           log=log, high_watermark=end if hw is None else hw)


def _broker(partitions=None, groups=None, cluster=False, controller=None, produces=0, fetches=0):
    rm = SimpleNamespace(partitions=partitions or {}, delayed_produces=produces, delayed_fetches=fetches)
    return SimpleNamespace(replica_manager=rm, group_coordinator=SimpleNamespace(groups=groups or {}),
                           cluster=cluster, controller=controller)


def _group(offsets, members=0):
    return SimpleNamespace(members={f"m{i}": None for i in range(members)},
                           offsets={tp: SimpleNamespace(offset=o) for tp, o in offsets.items()})


def _scrape(broker, stats=None, connections=0) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of one scrape."""
    body = render(build_registry(broker, stats or BrokerStats(), lambda: connections, process=False)).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


def test_topic_counters_are_kafkas_brokertopicmetrics():
    stats = BrokerStats()
    stats.record_produce("orders", 1000, 10)
    stats.record_produce("orders", 500, 4)
    stats.record_fetch("orders", 1500)
    stats.record_produce("audit", 7, 1)
    got = _scrape(_broker(), stats)
    orders = (("topic", "orders"),)
    assert got[("kafka_server_brokertopicmetrics_bytesin_total", orders)] == 1500
    assert got[("kafka_server_brokertopicmetrics_messagesin_total", orders)] == 14
    assert got[("kafka_server_brokertopicmetrics_bytesout_total", orders)] == 1500
    assert got[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "audit"),))] == 7
    assert got[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "audit"),))] == 0
    stats.forget_topic("audit")
    assert ("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "audit"),)) not in _scrape(_broker(), stats)


def test_requests_are_counted_per_version_with_a_latency_histogram_in_ms():
    stats = BrokerStats()
    for seconds in (0.0002, 0.0005, 0.003, 0.003, 45.0):  # 0.5 ms sits in the le="0.5" bucket
        stats.record_request("Produce", 9, seconds)
    stats.record_request("Produce", 3, 0.0001)
    got = _scrape(_broker(), stats)
    assert got[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "9")))] == 5
    assert got[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "3")))] == 1

    def bucket(le: str) -> float:
        return got[("kafka_network_requestmetrics_totaltimems_bucket", (("le", le), ("request", "Produce")))]

    assert bucket("0.5") == 3 and bucket("2.5") == 3 and bucket("5.0") == 5 and bucket("30000.0") == 5
    assert bucket("+Inf") == 6
    assert got[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] == 6
    assert abs(got[("kafka_network_requestmetrics_totaltimems_sum", (("request", "Produce"),))] - 45006.8) < 1e-6
    assert len(LATENCY_BUCKETS_MS) + 1 == sum(1 for name, labels in got
                                              if name.endswith("_bucket") and ("request", "Produce") in labels)


def test_logs_isr_health_and_purgatories_are_read_at_scrape_time():
    partitions = {
        ("t", 0): _partition(isr=(1, 2, 3), replicas=(1, 2, 3), min_isr=2, size=4096, end=40, start=5),
        ("t", 1): _partition(isr=(1, 2), replicas=(1, 2, 3), min_isr=2, size=10, end=2),  # under-replicated
        ("t", 2): _partition(isr=(1,), replicas=(1, 2, 3), min_isr=2),  # under-replicated and under min ISR
        ("t", 3): _partition(leader=False, isr=(2,), replicas=(1, 2, 3), min_isr=2),  # a follower: not counted
    }
    got = _scrape(_broker(partitions, produces=2, fetches=7))
    assert got[("kafka_log_log_size", (("partition", "0"), ("topic", "t")))] == 4096
    assert got[("kafka_log_log_logendoffset", (("partition", "0"), ("topic", "t")))] == 40
    assert got[("kafka_log_log_logstartoffset", (("partition", "0"), ("topic", "t")))] == 5
    assert got[("kafka_log_log_logendoffset", (("partition", "3"), ("topic", "t")))] == 0  # followers' logs too
    assert got[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 2
    assert got[("kafka_server_replicamanager_underminisrpartitioncount", ())] == 1
    assert got[("kafka_server_replicamanager_partitioncount", ())] == 4
    assert got[("kafka_server_replicamanager_leadercount", ())] == 3
    purgatory = "kafka_server_delayedoperationpurgatory_purgatorysize"
    assert got[(purgatory, (("delayedoperation", "Produce"),))] == 2
    assert got[(purgatory, (("delayedoperation", "Fetch"),))] == 7


def test_the_single_node_is_its_own_active_controller():
    got = _scrape(_broker())
    assert got[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert got[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 0


def test_in_a_cluster_only_the_active_controller_counts_and_reports_offline_partitions():
    live = {1, 2}
    states = {("t", 0): SimpleNamespace(leader=1), ("t", 1): SimpleNamespace(leader=3), ("t", 2): SimpleNamespace(leader=-1)}
    ctx = SimpleNamespace(states=states, is_online=lambda tp: states[tp].leader in live)
    active = _scrape(_broker(cluster=True, controller=SimpleNamespace(ctx=ctx)))
    assert active[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert active[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 2
    for controller in (SimpleNamespace(ctx=None), None):  # following, or not started yet
        other = _scrape(_broker(cluster=True, controller=controller))
        assert other[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0
        assert other[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 0


def test_group_lag_is_the_high_watermark_minus_the_committed_offset():
    partitions = {("t", 0): _partition(end=100, hw=90), ("t", 1): _partition(end=5)}
    groups = {"billing": _group({("t", 0): 30, ("t", 1): 7, ("elsewhere", 0): 3}, members=2), "idle": _group({})}
    got = _scrape(_broker(partitions, groups))
    labels = lambda t, p: (("consumergroup", "billing"), ("partition", str(p)), ("topic", t))
    assert got[("kafka_consumergroup_lag", labels("t", 0))] == 60  # the high watermark, not the log end
    assert got[("kafka_consumergroup_lag", labels("t", 1))] == 0  # committed past a follower's HW: never negative
    assert got[("kafka_consumergroup_current_offset", labels("t", 0))] == 30
    # a partition this broker holds no replica of: its committed offset, no lag it could vouch for
    assert got[("kafka_consumergroup_current_offset", labels("elsewhere", 0))] == 3
    assert ("kafka_consumergroup_lag", labels("elsewhere", 0)) not in got
    assert got[("kafka_consumergroup_members", (("consumergroup", "billing"),))] == 2
    assert got[("kafka_consumergroup_members", (("consumergroup", "idle"),))] == 0


def test_connections_and_process_metrics():
    got = _scrape(_broker(), connections=3)
    assert got[("kafka_server_socket_server_metrics_connection_count", (("listener", "PLAINTEXT"),))] == 3
    body = render(build_registry(_broker(), BrokerStats(), lambda: 0)).decode()
    names = {s.name for family in text_string_to_metric_families(body) for s in family.samples}
    assert {"process_open_fds", "process_resident_memory_bytes"} <= names
