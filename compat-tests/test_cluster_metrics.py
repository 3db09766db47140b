"""Prometheus metrics in a three-broker ZooKeeper cluster (real processes, RF 3): every broker
serves its own endpoint; records in summed over the leaders equal what was acknowledged; followers
fetch in incremental fetch sessions; exactly
one broker counts as the active controller, before and after the controller is killed with
SIGKILL; once the dead broker leaves the ISRs, the leaders report under-replicated partitions and
no partition is offline — and every acknowledged record is still readable."""

from __future__ import annotations

import pytest

import clusterkit as ck
import metricskit as mk

pytestmark = pytest.mark.timeout(180)

TOPIC = "metered"


@pytest.fixture
def cluster(tmp_path):
    c = ck.start_cluster(tmp_path / "cluster", 3, {"metrics.listener": mk.LISTENER_ANY_PORT,
                                                    "default.replication.factor": "3"})
    try:
        yield c
    finally:
        ck.stop_cluster(c)


def _scrapes(cluster, urls) -> dict[int, mk.Samples]:
    return {broker_id: mk.scrape(url) for broker_id, url in urls.items() if cluster.brokers[broker_id].running}


def test_a_killed_controller_leaves_one_active_controller_and_under_replicated_leaders(cluster):
    urls = {broker_id: ck.wait_for(lambda b=broker: mk.metrics_url(b.log_path), 10, f"broker {broker_id}'s endpoint")
            for broker_id, broker in cluster.brokers.items()}
    assert len(set(urls.values())) == 3
    ck.create_topic(cluster, TOPIC, 3, 3)
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), TOPIC).start()
    ck.wait_for(lambda: producer.acked_count >= 300, 30, "300 acknowledged records")
    producer.stop()
    assert not producer.failed, producer.failed[:3]

    before = _scrapes(cluster, urls)
    assert sum(mk.total(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC)
               for s in before.values()) == producer.acked_count  # each record counted once, by its leader
    assert sum(mk.value(s, "kafka_controller_kafkacontroller_activecontrollercount") for s in before.values()) == 1
    assert all(mk.value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0 for s in before.values())
    # the followers fetch in incremental sessions (KIP-227): every leader holds sessions and has
    # answered incremental fetches; nobody's session failed
    for s in before.values():
        assert mk.value(s, "kafka_server_fetchsessioncache_numincrementalfetchsessions") >= 1
        assert mk.value(s, "kbroker_fetch_session_requests_total", kind="incremental") > 0
        assert mk.value(s, "kbroker_fetch_session_requests_total", kind="error") == 0
    for partition in range(3):  # every replica's log metrics: three logs per partition
        assert sum(1 for s in before.values()
                   if mk.value(s, "kafka_log_log_logendoffset", topic=TOPIC, partition=str(partition)) is not None) == 3

    victim = ck.controller_id(cluster)
    cluster.brokers[victim].kill()

    def failed_over() -> dict[int, mk.Samples] | None:
        now = _scrapes(cluster, urls)
        leaders = {ck.leader_of(cluster, TOPIC, p) for p in range(3)}
        if victim in leaders or -1 in leaders:
            return None
        if sum(mk.value(s, "kafka_controller_kafkacontroller_activecontrollercount") for s in now.values()) != 1:
            return None
        if any(mk.value(now[leader], "kafka_server_replicamanager_underreplicatedpartitions") < 1 for leader in leaders):
            return None
        return now

    after = ck.wait_for(failed_over, 45, "a new controller and under-replicated partitions on the leaders")
    assert set(after) == set(cluster.brokers) - {victim}
    active = [s for s in after.values() if mk.value(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1]
    assert mk.value(active[0], "kafka_controller_kafkacontroller_offlinepartitionscount") == 0  # RF 3: all led
    assert sum(mk.value(s, "kafka_server_replicamanager_underreplicatedpartitions") for s in after.values()) >= 3
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), TOPIC, 3))
