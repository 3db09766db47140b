"""An interrupted delivery, forced: the delay-log leader has written its intent (which producer id,
sequence and records the delivery uses) and the delivery has not been acknowledged when the
broker dies. The broker that delivers next must send exactly that batch again, with the recorded
producer id and sequence, so the target keeps one copy.

- Cluster (real ZooKeeper, three real brokers): the target partition is led by B, the delay-log
  partition by A with its only other replica on C. B is SIGSTOPped just before the records come
  due, so A writes its intent and then waits on its Produce to B; the test sees the intent in the
  delay log (its records shown as being delivered), kills A with SIGKILL and resumes B, which
  finds A's Produce in its socket and appends it. C takes over the delay log and resends the
  intent: the target must answer it as the duplicate it is (a second copy fails the test).
- Single node: the broker runs with min.insync.replicas=2 (a real refusal: the delivery's acks=all
  append fails with NOT_ENOUGH_REPLICAS, and is retried), so its intent stays open; it is killed
  with SIGKILL and restarted without that setting, and resends the intent.

Each asserts that the interrupted-intent path was taken (the open intent in the delay log, the new
leader's "deliveries to resume" log line), then that every acknowledged delayed record is in the
target exactly once, not early, in due order. confluent-kafka only: the clients are not what is
under test here (test_delayed.py and test_cluster_delayed.py run both families).
"""

from __future__ import annotations

import re
import time

import pytest

import clusterkit as ck
import delayedkit as dk
from kbroker.admin.client import AdminClient
from kbroker.admin.delayed import _read_partition, replay
from kbroker.delayed.format import DELAYED_TOPIC, partition_for

pytestmark = pytest.mark.timeout(240)

DELAY_PARTITIONS = 3
RESUMED = re.compile(r"__delayed_messages-(\d+): .* (\d+) deliveries to resume")


class _Leader:
    def __init__(self, address: str) -> None:
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)


def delivering(address: str, partition: int, topic: str) -> list:
    """The records of `topic` the delay log (read from the broker at `address`) shows in an open
    intent: their delivery started and has no tombstones yet."""
    with AdminClient(address, timeout=10) as client:
        records = _read_partition(client, _Leader(address), partition)
    return [p for p in replay(partition, records) if p.delivering and p.record.target[0] == topic]


def resumed(log_text: str, partition: int) -> int:
    """How many interrupted deliveries of the delay-log partition a broker's log says it resumed."""
    return sum(int(m.group(2)) for m in RESUMED.finditer(log_text) if int(m.group(1)) == partition)


def due_items(start_ms: int, count: int) -> list[tuple[bytes | None, bytes, list[tuple[str, bytes]], int]]:
    """`count` records due from `start_ms`: the first five at that very millisecond (they fire
    together, into one intent), the rest from 100 ms later, out of order on purpose."""
    dues = [start_ms] * 5 + [start_ms + 100 + (i * 37) % 600 for i in range(count - 5)]
    return [(f"k{i}".encode(), f"resend-{i}".encode(), [("deliver.at", str(d).encode())], start_ms - 60_000)
            for i, d in enumerate(dues)]


# -- single node -------------------------------------------------------------------------------------

def test_single_node_interrupted_delivery_resent_once(fresh_kbroker, kt):
    kt.require_module("confluent_kafka")
    broker = fresh_kbroker
    broker.stop()
    broker.overrides["min.insync.replicas"] = "2"  # the delivery's acks=all append is refused
    broker.start()
    topic = kt.topic_name("resend", "single")
    kafka = kt.require_module("kafka")
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([kafka.admin.NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    producer = dk.Producer("confluent", broker.bootstrap, idempotent=False, acks="1")
    try:
        sent = producer.send(topic, due_items(dk.now_ms() + 3000, 30))
    finally:
        producer.close()
    delay_partition = partition_for((topic, 0), 10)  # the single node's default partition count
    open_intent = ck.wait_for(lambda: delivering(broker.bootstrap, delay_partition, topic), 20,
                              "an intent written and its delivery refused")
    assert {p.record.value for p in open_intent} >= {f"resend-{i}".encode() for i in range(5)}
    broker.kill()
    del broker.overrides["min.insync.replicas"]
    broker.start()
    got = dk.read("confluent", broker.bootstrap, topic, len(sent), timeout=30)
    dk.check_delivered(sent, got)
    log = broker.stderr_path.read_text(errors="replace").split("===== start #")[-1]
    assert resumed(log, delay_partition) == 1, "the restarted broker did not resume the interrupted delivery"
    assert not delivering(broker.bootstrap, delay_partition, topic)


# -- cluster -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("delayed-resend"), 3, {
        "delayed.messages.topic.num.partitions": str(DELAY_PARTITIONS),
        "delayed.messages.topic.replication.factor": "2",  # one broker is not a replica: the target's leader
        "delayed.messages.topic.min.isr": "1",
    })
    yield c
    ck.stop_cluster(c)


def test_cluster_interrupted_delivery_resent_once(cluster, kt):
    kt.require_module("confluent_kafka")
    dk.create_delay_log_in_cluster(cluster, DELAY_PARTITIONS, 2)
    parts = ck.partitions(cluster, DELAYED_TOPIC)
    delay_partition = 0
    a = parts[delay_partition]["leader"]
    c = next(r for r in parts[delay_partition]["replicas"] if r != a)
    b = next(x for x in cluster.brokers if x not in (a, c))
    topic = next(name for i in range(1000) if partition_for((name := kt.topic_name("resend", f"cluster{i}"), 0),
                                                             DELAY_PARTITIONS) == delay_partition)
    with ck.AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic(topic, assignment=[[b, c]])
    ck.wait_for(lambda: ck.in_sync(cluster, topic, 1, 2), 30, f"{topic} in sync")

    producer = dk.Producer("confluent", ck.live_bootstrap(cluster))
    try:
        due = dk.now_ms() + 5000
        sent = producer.send(topic, due_items(due, 30))
    finally:
        producer.close()
    assert dk.now_ms() < due - 500, "the produce took too long to pause B before the records come due"
    time.sleep(max(0.0, (due - 400 - dk.now_ms()) / 1000))
    cluster.brokers[b].pause()  # A's delivery to B will wait for an answer
    try:
        address_a = cluster.brokers[a].address
        open_intent = ck.wait_for(lambda: delivering(address_a, delay_partition, topic), 20,
                                  "A's intent written, its delivery to B unanswered")
        assert {p.record.value for p in open_intent} >= {f"resend-{i}".encode() for i in range(5)}
        cluster.brokers[a].kill()
    finally:
        cluster.brokers[b].resume()  # B appends A's Produce, still in its socket
    ck.wait_for(lambda: ck.leader_of(cluster, DELAYED_TOPIC, delay_partition) == c, 60,
                f"broker {c} leading {DELAYED_TOPIC}-{delay_partition}")
    got = dk.read("confluent", ck.live_bootstrap(cluster), topic, len(sent), timeout=60)
    dk.check_delivered(sent, got)
    assert resumed(cluster.brokers[c].log_tail(10**7), delay_partition) == 1, \
        f"broker {c} did not resume the interrupted delivery"
    assert not delivering(cluster.brokers[c].address, delay_partition, topic)
