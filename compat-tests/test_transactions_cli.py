"""`kbroker transactions` against a real broker: list and describe what a confluent-kafka
transactional producer is doing, and find and abort a hanging transaction — one whose records hold
the last stable offset back while its coordinator knows nothing of it (written here with raw
protocol requests, without AddPartitionsToTxn, which is how a hanging transaction comes about)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from conftest import REPO, require_module, wait_until

from kbroker.admin.client import LATEST, AdminClient
from kbroker.wire.records import Record, build_batch

ck = require_module("confluent_kafka")

KBROKER_OVERRIDES = {"num.partitions": "1"}
INIT_PRODUCER_ID, PRODUCE, FIND_COORDINATOR = 22, 0, 10


def find_txn_coordinator(conn, transactional_id: str) -> None:
    """What a transactional producer asks first; it creates `__transaction_state` on first use."""
    body = conn.call(FIND_COORDINATOR, {"key": transactional_id, "key_type": 1,
                                        "coordinator_keys": [transactional_id]}, 4)
    assert body.coordinators[0].error_code == 0


def cli(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", "transactions", *args,
                           "--bootstrap-server", broker.bootstrap, "--timeout", "20"],
                          capture_output=True, text=True, timeout=60, cwd=str(REPO))


def _read_committed(broker, topic: str, expect: int, timeout: float = 20) -> list[bytes]:
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"cli-{topic}-{time.monotonic()}",
                            "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                            "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and len(got) < expect:
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
        quiet = time.monotonic() + 1.5  # nothing more arrives
        while time.monotonic() < quiet:
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        consumer.close()
    return got


def test_list_and_describe_show_an_open_transaction(kbroker):
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "transactional.id": "cli-open",
                            "transaction.timeout.ms": 60000})
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce("cli-open-topic", value=b"one")
    producer.flush(20)  # the partition is added to the transaction with the first send

    listed = json.loads(cli(kbroker, "list", "--output", "json").stdout)
    mine = [t for t in listed if t["TransactionalId"] == "cli-open"]
    assert [t["TransactionState"] for t in mine] == ["Ongoing"]

    out = cli(kbroker, "describe", "--transactional-id", "cli-open", "--output", "json")
    assert out.returncode == 0, out.stderr
    described = json.loads(out.stdout)[0]
    assert described["TransactionState"] == "Ongoing"
    assert described["TopicPartitions"] == "cli-open-topic-0"
    assert described["TransactionTimeoutMs"] == 60000 and described["TransactionDurationMs"] >= 0

    producer.commit_transaction(20)
    described = json.loads(cli(kbroker, "describe", "--transactional-id", "cli-open", "--output", "json").stdout)[0]
    assert described["TransactionState"] == "CompleteCommit" and described["TopicPartitions"] == ""

    missing = cli(kbroker, "describe", "--transactional-id", "cli-never-used")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr


def test_a_hanging_transaction_is_found_and_aborted(kbroker):
    topic = "cli-hanging"
    with AdminClient(kbroker.bootstrap, timeout=20) as admin:
        admin.create_topic(topic, partitions=1)
        coordinator = admin.connection(kbroker.host, kbroker.port)
        find_txn_coordinator(coordinator, "cli-hanging-producer")
        # a producer id and epoch from the coordinator, then a transactional send it never hears of
        init = coordinator.call(INIT_PRODUCER_ID, {"transactional_id": "cli-hanging-producer",
                                                   "transaction_timeout": 60000, "producer_id": -1,
                                                   "producer_epoch": -1}, 4)
        assert init.error_code == 0
        batch = build_batch([Record(0, int(time.time() * 1000), b"k", b"hanging")], producer_id=init.producer_id,
                            producer_epoch=init.producer_epoch, base_sequence=0, is_transactional=True)
        produced = coordinator.call(PRODUCE, {"transactional_id": "cli-hanging-producer", "acks": -1,
                                              "timeout": 10000, "topic_data": [{"name": topic, "partition_data": [
                                                  {"index": 0, "records": batch}]}]}, 8)
        assert produced.responses[0].partition_responses[0].error_code == 0

        # a committed transaction after it stays invisible: the hanging one holds the LSO at 0
        producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "transactional.id": "cli-after"})
        producer.init_transactions(20)
        producer.begin_transaction()
        producer.produce(topic, value=b"committed")
        producer.commit_transaction(20)
        # data, data, marker (the commit's marker is written in the background after EndTxn answers)
        wait_until(lambda: admin.list_offsets([(topic, 0)], LATEST)[(topic, 0)] == 3, 10, "the commit marker")
        assert admin.list_offsets([(topic, 0)], LATEST, read_committed=True)[(topic, 0)] == 0

        found = cli(kbroker, "find-hanging", "--max-transaction-timeout", "0", "--output", "json")
        assert found.returncode == 0, found.stderr
        hanging = json.loads(found.stdout)
        assert [(h["Topic"], h["Partition"], h["ProducerId"], h["CurrentTransactionStartOffset"]) for h in hanging] \
            == [(topic, 0, init.producer_id, 0)]

        aborted = cli(kbroker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
        assert aborted.returncode == 0, aborted.stderr
        wait_until(lambda: admin.list_offsets([(topic, 0)], LATEST, read_committed=True)[(topic, 0)] == 4, 10,
                   "the last stable offset to move past the aborted transaction")
        assert json.loads(cli(kbroker, "find-hanging", "--max-transaction-timeout", "0",
                              "--output", "json").stdout) == []
        again = cli(kbroker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
        assert again.returncode == 1 and "no open transaction" in again.stderr
    assert _read_committed(kbroker, topic, expect=1) == [b"committed"]


def test_add_partitions_v4_and_v5_batch_transactions_and_verify(kbroker):
    """The brokers' form of AddPartitionsToTxn (v4+: several transactions per request, verify-only
    entries that change nothing), sent raw: no stock client sends it."""
    topic = "cli-v4"
    add = 24
    with AdminClient(kbroker.bootstrap, timeout=20) as admin:
        admin.create_topic(topic, partitions=2)
        conn = admin.connection(kbroker.host, kbroker.port)
        ids = {}
        for tid in ("v4-a", "v4-b"):
            find_txn_coordinator(conn, tid)
            init = conn.call(INIT_PRODUCER_ID, {"transactional_id": tid, "transaction_timeout": 60000,
                                                "producer_id": -1, "producer_epoch": -1}, 4)
            assert init.error_code == 0
            ids[tid] = (init.producer_id, init.producer_epoch)

        def entry(tid, verify, partitions, producer=None):
            pid, epoch = producer or ids[tid]
            return {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "verify_only": verify,
                    "topics": [{"name": topic, "partitions": partitions}]}

        def codes(body):
            assert body.error_code == 0
            return {r.transactional_id: {p.partition_index: p.partition_error_code
                                         for t in r.topic_results for p in t.results_by_partition}
                    for r in body.results_by_transaction}

        first = conn.call(add, {"transactions": [entry("v4-a", False, [0, 1]), entry("v4-b", True, [0])]}, 4)
        assert codes(first) == {"v4-a": {0: 0, 1: 0}, "v4-b": {0: 120}}  # b has no transaction: TRANSACTION_ABORTABLE
        verify = conn.call(add, {"transactions": [entry("v4-a", True, [0, 1])]}, 5)
        assert codes(verify) == {"v4-a": {0: 0, 1: 0}}
        stranger = conn.call(add, {"transactions": [entry("v4-b", False, [0], producer=(ids["v4-b"][0] + 999, 0))]}, 5)
        assert codes(stranger) == {"v4-b": {0: 49}}  # INVALID_PRODUCER_ID_MAPPING
        described = json.loads(cli(kbroker, "describe", "--transactional-id", "v4-a", "--output", "json").stdout)[0]
        assert described["TransactionState"] == "Ongoing"
        assert described["TopicPartitions"] == f"{topic}-0,{topic}-1"
        assert json.loads(cli(kbroker, "describe", "--transactional-id", "v4-b",
                              "--output", "json").stdout)[0]["TransactionState"] == "Empty"
