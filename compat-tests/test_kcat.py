"""kcat 1.7.1 (Debian, librdkafka 2.0.2: an older, stricter parser) against kbroker.

kcat has no admin API: topics are auto-created by its producer (this module's broker runs with
num.partitions=3) and deleted with kafka-python's admin client. kcat cannot set per-message
timestamps, so librdkafka stamps CreateTime; the test checks they fall inside the produce window
and derives the by-timestamp expectations from what was consumed. Headers (-H) are per
invocation, so each partition gets its own header set.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

pytestmark = pytest.mark.timeout(120)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KBROKER_OVERRIDES = {"num.partitions": "3"}


@pytest.fixture
def kcat(kt):
    return kt.require_exe("kcat")


def run_kcat(kcat, *args, stdin=None, timeout=60):
    cp = subprocess.run([kcat, *args], input=stdin, capture_output=True, timeout=timeout)
    assert cp.returncode == 0, (f"kcat {' '.join(args)} exited {cp.returncode}\n"
                                f"stderr: {cp.stderr.decode(errors='replace')[-2000:]}")
    return cp.stdout.decode()


def produce(kcat, kbroker, topic, msgs, codec):
    for p in sorted({m.partition for m in msgs}):
        part = [m for m in msgs if m.partition == p]
        headers = part[0].headers
        assert all(m.headers == headers for m in part), "kcat headers are per invocation"
        lines = "".join(f"{m.key.decode()}\t{m.value.decode()}\n" for m in part)
        args = ["-P", "-b", kbroker.bootstrap, "-t", topic, "-p", str(p), "-K", "\t", "-m", "15",
                "-X", f"compression.codec={codec}", "-X", "acks=all", "-X", "linger.ms=5"]
        for k, v in headers:
            args += ["-H", f"{k}={v.decode()}"]
        run_kcat(kcat, *args, stdin=lines.encode())


def consume(kcat, kt, kbroker, topic, n):
    out = run_kcat(kcat, "-C", "-b", kbroker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-J",
                   "-c", str(n), "-m", "15", "-X", "fetch.wait.max.ms=200")
    recs = []
    for line in out.splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        h = d.get("headers") or []
        headers = tuple((h[i], h[i + 1].encode()) for i in range(0, len(h), 2))
        recs.append(kt.Rec(d["partition"], d["offset"], None if d["key"] is None else d["key"].encode(),
                           None if d["payload"] is None else d["payload"].encode(), headers, d["ts"]))
    return recs


def query_offsets(kcat, kbroker, topic, partitions, ts):
    """kcat -Q: ListOffsets by timestamp; -1 is latest, -2 earliest (passed through by librdkafka)."""
    args = ["-Q", "-b", kbroker.bootstrap, "-m", "15"]
    for p in partitions:
        args += ["-t", f"{topic}:{p}:{ts}"]
    out = run_kcat(kcat, *args)
    found = {int(p): int(o) for p, o in re.findall(r"\[(\d+)\]\s+offset\s+(-?\d+)", out)}
    assert sorted(found) == sorted(partitions), f"unparsed kcat -Q output: {out!r}"
    return found


def list_topics(kcat, kbroker):
    # all topics (no -t): a metadata request for one named topic could auto-create it again
    return {t["topic"]: t for t in json.loads(run_kcat(kcat, "-L", "-J", "-b", kbroker.bootstrap, "-m", "15"))["topics"]}


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(kbroker, kcat, kt, codec):
    topic = kt.topic_name("kcat", codec)
    msgs = kt.make_messages(f"kcat-{codec}", printable=True, headers_per_partition=True)
    before = int(time.time() * 1000)
    produce(kcat, kbroker, topic, msgs, codec)
    after = int(time.time() * 1000)

    meta = list_topics(kcat, kbroker)
    assert topic in meta, f"auto-created {topic} missing from kcat -L"
    assert sorted(p["partition"] for p in meta[topic]["partitions"]) == [0, 1, 2], meta[topic]
    assert all(p["leader"] == 0 for p in meta[topic]["partitions"]), meta[topic]

    got = consume(kcat, kt, kbroker, topic, len(msgs))
    kt.assert_records_match(msgs, got, check_timestamps=False)
    for r in got:
        assert before - 1000 <= r.timestamp <= after + 1000, f"CreateTime {r.timestamp} outside [{before}, {after}]"
    per_partition = kt.by_partition(got)  # consumed records carry the real timestamps
    for p, recs in per_partition.items():
        ts = [r.timestamp for r in recs]
        assert ts == sorted(ts), f"partition {p}: producer timestamps went backwards {ts}"

    parts = [0, 1, 2]
    assert query_offsets(kcat, kbroker, topic, parts, -2) == {p: 0 for p in parts}
    assert query_offsets(kcat, kbroker, topic, parts, -1) == {p: len(per_partition[p]) for p in parts}
    for p in parts:
        ts = [r.timestamp for r in per_partition[p]]
        for target in (ts[0] - 5, ts[len(ts) // 2], ts[-1], ts[-1] + 1):
            exp = kt.expected_offset_for_timestamp(per_partition[p], target)
            got_off = query_offsets(kcat, kbroker, topic, [p], target)[p]
            assert got_off == (-1 if exp is None else exp), f"partition {p} by-timestamp {target}: {got_off} != {exp}"

    kafka = kt.require_module("kafka")
    admin = kafka.KafkaAdminClient(bootstrap_servers=kbroker.bootstrap, request_timeout_ms=15000)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()
    kt.wait_until(lambda: topic not in list_topics(kcat, kbroker), 15, f"{topic} gone from kcat -L")


def test_metadata_list(kbroker, kcat):
    """kcat -L: the broker list advertises node 0 on the listener address."""
    meta = json.loads(run_kcat(kcat, "-L", "-J", "-b", kbroker.bootstrap, "-m", "15"))
    brokers = {b["id"]: b["name"] for b in meta["brokers"]}
    assert brokers == {0: kbroker.bootstrap}, meta["brokers"]
