"""The schema registry on a three-broker ZooKeeper cluster (clusterkit): every broker serves it,
one writes (the leader of `_schemas`-0; the others forward to it), and a SIGKILL of that leader
in the middle of registrations loses nothing that was acknowledged.

Three confluent-kafka SchemaRegistryClients, one per broker, register distinct Avro schemas in
turn (each a record of its own name, so each should get a new id) from a thread, retrying what
fails, noting each id an answer gave. While they work, the leader of `_schemas`-0 is SIGKILLed;
registrations go on through the two others (a new leader is elected among the in-sync replicas,
min.insync.replicas 2), then the killed broker comes back.

Checked: every acknowledged registration is answered, by every broker's registry, with the id it
was given and its schema (GET /schemas/ids/{id}, the subject's versions); distinct schemas never
share an id; a schema registered again (a retry whose first answer was lost) keeps one id.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

import clusterkit as ck
from conftest import free_port

pytest.importorskip("confluent_kafka")
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

SIZE = 3
TOTAL = 90


def _schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"R{i}", "namespace": "kill.test",
                       "fields": [{"name": "f", "type": "int"}]})


@pytest.fixture
def cluster(tmp_path):
    ports = {i: free_port() for i in range(1, SIZE + 1)}
    c = ck.start_cluster(tmp_path, SIZE, broker_overrides={
        i: {"schema.registry.listener": f"http://127.0.0.1:{port}"} for i, port in ports.items()})
    c.registry_urls = {i: f"http://127.0.0.1:{port}" for i, port in ports.items()}
    try:
        yield c
    finally:
        ck.stop_cluster(c)


class Registrar:
    """Registers schema i under subject s-i through the brokers in turn until each is answered."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.clients = {i: SchemaRegistryClient({"url": url, "timeout": 10, "max.retries": 0})
                        for i, url in cluster.registry_urls.items()}
        self.acked: dict[int, int] = {}  # i -> the id its answer gave
        self.errors: list[str] = []
        self.next = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        deadline = time.monotonic() + 150
        turn = 0
        while self.next < TOTAL and time.monotonic() < deadline:
            broker_id = 1 + turn % SIZE
            turn += 1
            if not self.cluster.brokers[broker_id].running:
                continue
            try:
                # a fresh client cache each time, so a retry really asks the registry
                client = SchemaRegistryClient({"url": self.cluster.registry_urls[broker_id], "timeout": 10})
                schema_id = client.register_schema(f"s-{self.next}", Schema(_schema(self.next), "AVRO"))
            except (SchemaRegistryError, Exception) as exc:  # refused, timed out, broker gone: try again
                self.errors.append(f"{self.next} via {broker_id}: {str(exc)[:160]}")
                time.sleep(0.2)
                continue
            self.acked[self.next] = schema_id
            self.next += 1
            time.sleep(0.02)


def test_registrations_survive_the_kill_of_the_registry_leader(cluster):
    first = SchemaRegistryClient({"url": cluster.registry_urls[2]})
    first.register_schema("warm-up", Schema(_schema(TOTAL), "AVRO"))  # creates _schemas (RF 3)
    ck.wait_for(lambda: ck.in_sync(cluster, "_schemas", 1, 3), 30, "_schemas fully in sync")
    registrar = Registrar(cluster)
    registrar.thread.start()
    ck.wait_for(lambda: registrar.next >= 20, 60, "20 registrations")
    victim = ck.leader_of(cluster, "_schemas")
    cluster.brokers[victim].kill()
    acked_before_kill = registrar.next
    ck.wait_for(lambda: registrar.next >= acked_before_kill + 30, 90,
                f"30 more registrations after killing broker {victim}")
    cluster.brokers[victim].start()
    registrar.thread.join(160)
    assert registrar.next == TOTAL, (registrar.errors[-5:], ck.failure_report(cluster))

    ids = registrar.acked
    assert len(set(ids.values())) == TOTAL, "distinct schemas must never share an id"
    for broker_id, url in cluster.registry_urls.items():
        client = SchemaRegistryClient({"url": url})
        ck.wait_for(lambda: _answers(client), 60, f"broker {broker_id}'s registry")
        subjects = set(client.get_subjects())
        for i, schema_id in ids.items():
            assert f"s-{i}" in subjects
            assert json.loads(client.get_schema(schema_id).schema_str)["name"] == f"R{i}", (broker_id, i)
            latest = client.get_latest_version(f"s-{i}")
            assert (latest.version, latest.schema_id) == (1, schema_id), (broker_id, i)
    # a retry of an acknowledged schema is answered with its id, never a new one
    for i in (0, acked_before_kill, TOTAL - 1):
        again = SchemaRegistryClient({"url": cluster.registry_urls[victim]})
        assert again.register_schema(f"s-{i}", Schema(_schema(i), "AVRO")) == ids[i]


def _answers(client) -> bool:
    try:
        client.get_subjects()
        return True
    except Exception:
        return False
