"""Spark Structured Streaming over kbroker with the built-in Kafka connector: the streaming ETL
example (`examples/spark/sensor_etl.py`) fed by the load generator (`examples/spark/loadgen.py`,
as functions in this session and once as the command a user runs), stopped in the middle of the
stream and started again from its checkpoints, and a streaming read across a SIGKILL and restart
of the broker.

Spark keeps its source offsets in the checkpoint and plans each micro-batch from ListOffsets
latest: the Parquet archive (a file sink, exactly once) must hold every record of the topic once,
at its partition and offset, whatever happened in between.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict

import pytest

import clusterkit as ck
import sparkkit
from kbroker.admin.client import AdminClient

pytestmark = pytest.mark.timeout(300)

RATE = 100      # events a second of event time
SENSORS = 4
CHUNK = 300     # events per loadgen write
WINDOW_MS = 2000


def create_topics(bootstrap: str, *topics: str, partitions: int = 3) -> None:
    with AdminClient(bootstrap, timeout=30) as admin:
        for topic in topics:
            admin.create_topic(topic, partitions=partitions, replication_factor=1)


def archived_count(query) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


def expected_windows(events: list[dict]) -> dict[tuple[str, int], dict]:
    """(sensor, window start) -> the stats the ETL writes for it."""
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for e in events:
        groups[(e["sensor"], e["event_ms"] - e["event_ms"] % WINDOW_MS)].append(e["reading"])
    return {(sensor, start): {"sensor": sensor, "window_start_ms": start, "window_end_ms": start + WINDOW_MS,
                              "count": len(r), "sum": sum(r), "min": min(r), "max": max(r), "avg": sum(r) / len(r)}
            for (sensor, start), r in groups.items()}


def test_etl_resumes_exactly_where_it_stopped(kt, kbroker, spark, tmp_path):
    """The ETL runs micro-batches while the load generator writes, is stopped in the middle of the
    stream, misses a chunk (and a value that is no event), and is started again on the same
    checkpoints: the archive holds each record exactly once, the stats topic every window with
    exactly its events' count, sum, min and max (a window written twice by the at-least-once
    Kafka sink is written identically)."""
    ck_module = kt.require_module("confluent_kafka")
    etl, loadgen = sparkkit.example("sensor_etl"), sparkkit.example("loadgen")
    source, stats = kt.topic_name("spark", "sensors"), kt.topic_name("spark", "stats")
    create_topics(kbroker.bootstrap, source, stats)
    archive, checkpoints = tmp_path / "archive", tmp_path / "checkpoints"
    origin = (int(time.time() * 1000) // WINDOW_MS) * WINDOW_MS - 3_600_000

    def write(first: int, count: int, origin_ms: int = origin) -> None:
        loadgen.write_events(spark, kbroker.bootstrap, source, first, count, origin_ms=origin_ms, rate=RATE,
                             sensors=SENSORS)

    def start():
        return etl.start(spark, kbroker.bootstrap, source, stats, archive, checkpoints, window="2 seconds",
                         watermark="10 seconds", trigger="500 milliseconds", max_offsets_per_trigger=120)

    queries = start()
    write(0, CHUNK)
    writer = threading.Thread(target=write, args=(CHUNK, CHUNK))
    writer.start()  # the second chunk arrives while the ETL runs ...
    kt.wait_until(lambda: archived_count(queries[1]) >= 2 * 120, 60, "the archive's first micro-batches")
    for query in queries:  # ... and the ETL is stopped in the middle of it
        query.stop()
    writer.join(60)
    stopped_at = len(sparkkit.read_archive(kt, spark, archive, source))
    # written while the ETL is down, by the load generator's command line, with a value that is no event
    jars = ",".join(str(j) for j in sparkkit.connector_jars(kt))
    cli = subprocess.run([sys.executable, str(sparkkit.EXAMPLES / "loadgen.py"), "--bootstrap-server", kbroker.bootstrap,
                          "--topic", source, "--rate", str(RATE), "--seconds", str(CHUNK // RATE), "--sensors",
                          str(SENSORS), "--first", str(2 * CHUNK), "--origin-ms", str(origin), "--jars", jars,
                          "--master", "local[1]"], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert cli.returncode == 0 and f"done: {CHUNK} events" in cli.stdout, f"{cli.stdout}\n{cli.stderr[-3000:]}"
    producer = ck_module.Producer({"bootstrap.servers": kbroker.bootstrap})
    producer.produce(source, key=b"bad", value=b"not json {", partition=0)
    assert producer.flush(30) == 0
    total = 3 * CHUNK
    assert 0 < stopped_at < total, f"the ETL was not stopped mid-stream ({stopped_at} of {total} archived)"

    queries = start()
    try:
        sparkkit.wait_archive(kt, spark, archive, source, total + 1, 90, "after the restart")
        # an event a minute later moves the watermark past every window of the others
        write(total, 1, origin_ms=origin + 60_000)
        events = [loadgen.event(i, origin_ms=origin, rate=RATE, sensors=SENSORS) for i in range(total)]
        closer = loadgen.event(total, origin_ms=origin + 60_000, rate=RATE, sensors=SENSORS)
        windows = expected_windows(events)
        written: list = []

        def all_windows():
            nonlocal written
            written = sparkkit.read_topic(kt, spark, kbroker.bootstrap, stats)
            return {json.loads(r.value)["window_start_ms"] for r in written} >= {s for _, s in windows}

        kt.wait_until(all_windows, 60, "every window in the stats topic", interval=1.0)
        rows = sparkkit.wait_archive(kt, spark, archive, source, total + 2, 30, "the closing event")
        for query in queries:
            assert query.exception() is None, query.exception()
    finally:
        for query in queries:
            query.stop()

    # the archive: exactly the source topic, record for record, and every event once
    assert rows == sparkkit.read_topic(kt, spark, kbroker.bootstrap, source)
    for p, recs in kt.by_partition(rows).items():
        assert [r.offset for r in recs] == list(range(len(recs))), f"partition {p}: archive offsets not dense"
    bad = [r for r in rows if r.key == b"bad"]
    assert [(r.partition, r.value) for r in bad] == [(0, b"not json {")]  # archived, left out of the stats
    rows = [r for r in rows if r.key != b"bad"]
    got_events = [json.loads(r.value) for r in rows]
    assert sorted(got_events, key=lambda e: e["event_id"]) == events + [closer]
    for r in rows:
        event = json.loads(r.value)
        assert r.key == event["sensor"].encode() and r.headers == (("event-id", str(event["event_id"]).encode()),)

    # the stats: every window once or identically again, with exactly its events' figures
    copies = Counter((r.key, r.value) for r in written)
    stats_by_window: dict[tuple[str, int], dict] = {}
    for (key, value), _n in copies.items():
        stat = json.loads(value)
        where = (stat["sensor"], stat["window_start_ms"])
        assert key == stat["sensor"].encode()
        assert where not in stats_by_window, f"window {where} written with two different values"
        stats_by_window[where] = stat
    assert set(stats_by_window) == set(windows), \
        f"windows missing {sorted(set(windows) - set(stats_by_window))[:5]}, extra {sorted(set(stats_by_window) - set(windows))[:5]}"
    for where, stat in stats_by_window.items():
        want = windows[where]
        assert {k: v for k, v in stat.items() if k != "avg"} == {k: v for k, v in want.items() if k != "avg"}, \
            f"window {where}: {stat} != {want}"
        assert stat["avg"] == pytest.approx(want["avg"]), f"window {where}: avg {stat['avg']} != {want['avg']}"


def test_stream_across_broker_restart(kt, fresh_kbroker, spark, tmp_path):
    """An archive query reads while an idempotent acks=all producer writes; the broker is SIGKILLed
    and started again on the same port and data: every acknowledged record is archived once at its
    offset, and the archive is the topic, record for record."""
    kt.require_module("confluent_kafka")
    etl = sparkkit.example("sensor_etl")
    topic = kt.topic_name("spark", "restart")
    create_topics(fresh_kbroker.bootstrap, topic)
    archive = tmp_path / "archive"
    query = etl.start_archive(spark, fresh_kbroker.bootstrap, topic, archive, tmp_path / "checkpoint",
                              trigger="500 milliseconds")
    producer = ck.AckedProducer(fresh_kbroker.bootstrap, topic).start()
    try:
        kt.wait_until(lambda: producer.acked_count >= 300 and archived_count(query) > 0, 60,
                      "records acknowledged and archived before the kill")
        fresh_kbroker.kill()
        time.sleep(1)
        fresh_kbroker.start()
        acked_before = producer.acked_count
        kt.wait_until(lambda: producer.acked_count >= acked_before + 300, 60, "acknowledgements after the restart")
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    in_log = sparkkit.read_topic(kt, spark, fresh_kbroker.bootstrap, topic)
    try:
        rows = sparkkit.wait_archive(kt, spark, archive, topic, len(in_log), 90, "everything in the log")
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    assert rows == in_log
    ck.check_exactly_once_in_order(producer.acked, {p: [(r.offset, r.value) for r in recs]
                                                    for p, recs in kt.by_partition(rows).items()})
