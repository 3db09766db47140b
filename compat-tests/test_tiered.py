"""Tiered storage (KIP-405) end to end, against a real broker process with the directory store:
closed segments are archived and deleted locally, and stock consumers read the whole history from
offset 0 anyway (records, keys, headers, timestamps, in order); ListOffsets answers earliest from
the archive and finds timestamps below the local log start; the archive survives a SIGKILL and a
restart (the manifest is reloaded; a torn temporary file is ignored); retention.ms removes
archived segments; read_committed reads from the archive skip aborted transactions.
The scenarios are written once and run with confluent-kafka (librdkafka), kafka-python and aiokafka."""

from __future__ import annotations

import time

import pytest

import tieredkit as tk

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def tiered(kt, tmp_path_factory):
    """A broker whose archive is a directory beside its data (`broker.archive`)."""
    workdir = tmp_path_factory.mktemp("kbroker-tiered")
    archive = workdir / "archive"
    broker = kt.Broker(workdir, {**tk.BROKER_OVERRIDES, "rsm.config.dir": str(archive)})
    broker.archive = archive
    yield from kt._running(broker)


def _setup(kt, broker, tag: str, partitions: int = 2, per_partition: int = 30, configs=None):
    topic = kt.topic_name("tiered", tag)
    tk.create_topic(broker.bootstrap, topic, partitions, configs=configs)
    msgs = kt.make_messages(tag, partitions=partitions, per_partition=per_partition)
    tk.produce(kt, broker.bootstrap, topic, msgs)
    starts = tk.wait_archived(broker.data_dir, broker.archive, topic, partitions)
    return topic, msgs, starts


@pytest.mark.parametrize("family", tk.FAMILIES)
def test_history_is_read_from_the_archive(kt, tiered, family):
    kt.require_module(tk.MODULES[family])
    topic, msgs, local_starts = _setup(kt, tiered, family.replace("-", ""))
    per_partition = kt.by_partition(msgs)
    ends = {p: len(v) for p, v in per_partition.items()}

    got = tk.consume(family, kt, tiered.bootstrap, topic, {p: 0 for p in ends}, ends)
    kt.assert_records_match(msgs, got)

    # earliest is the archive's start, latest the log end; timestamps below the local start are found
    targets = kt.timestamp_targets(per_partition[0])
    assert per_partition[0][local_starts[0] - 1].timestamp >= targets[1], "the targets must fall in the archive"
    kt.assert_list_offsets(per_partition, lambda spec: tk.offsets(family, tiered.bootstrap, topic, 2, spec), targets)
    assert tk.list_offsets_raw(tiered.bootstrap, topic, 2, tk.EARLIEST_LOCAL) == local_starts
    tiered_ends = tk.list_offsets_raw(tiered.bootstrap, topic, 2, tk.LATEST_TIERED)
    assert all(local_starts[p] - 1 <= tiered_ends[p] < ends[p] for p in ends), (tiered_ends, local_starts)

    # a read starting inside an archived segment, and one from the middle of the archive
    middle = {p: local_starts[p] // 2 + 1 for p in ends}
    got = tk.consume(family, kt, tiered.bootstrap, topic, middle, ends)
    for p in ends:
        mine = [r for r in got if r.partition == p]
        assert [r.offset for r in mine] == list(range(middle[p], ends[p]))
        assert [(r.key, r.value, r.headers) for r in mine] == \
            [(m.key, m.value, m.headers) for m in per_partition[p][middle[p]:]]


def test_archive_survives_sigkill_and_restart(kt, tiered):
    kt.require_module("kafka")
    topic, msgs, local_starts = _setup(kt, tiered, "restart")
    ends = {p: len(v) for p, v in kt.by_partition(msgs).items()}
    # a copy torn by a crash: a temporary file nothing names, and a torn manifest replacement
    directory = tk.archive_dir(tiered.archive, topic, 0)
    (directory / f"{99:020d}-{'ab' * 16}.log.tmp").write_bytes(b"\x00\x00\x00torn")
    (directory / "manifest.json.tmp").write_bytes(b'{"crc32c": 1, "manif')

    tiered.kill()
    tiered.start()

    for family in ("confluent", "kafka-python"):
        got = tk.consume(family, kt, tiered.bootstrap, topic, {p: 0 for p in ends}, ends)
        kt.assert_records_match(msgs, got)
        assert {p: o for p, (o, _ts) in tk.offsets(family, tiered.bootstrap, topic, 2, "earliest").items()} == \
            {0: 0, 1: 0}
    assert tk.list_offsets_raw(tiered.bootstrap, topic, 2, tk.EARLIEST_LOCAL) == local_starts
    # archiving goes on after the restart
    more = kt.make_messages("restart-more", partitions=2, per_partition=30, base_ts=msgs[-1].timestamp + 1000)
    tk.produce(kt, tiered.bootstrap, topic, more)
    tk.wait_for(lambda: all(tk.local_log_start(tiered.data_dir, topic, p) > local_starts[p] for p in ends), 30,
                "the new segments archived and deleted locally")


def test_retention_ms_removes_archived_segments(kt, tiered):
    kt.require_module("confluent_kafka")
    topic, msgs, local_starts = _setup(kt, tiered, "retention", partitions=1)
    first = tk.manifest(tiered.archive, topic, 0)["segments"][0]
    with tk.AdminClient(tiered.bootstrap, timeout=15) as admin:
        admin.alter_topic_configs(topic, {"retention.ms": "60000"}, [])  # every record is an hour old
    tk.wait_for(lambda: tk.list_offsets_raw(tiered.bootstrap, topic, 1, -2)[0] >= local_starts[0], 30,
                "the archive's retention to move the log start")
    earliest = tk.list_offsets_raw(tiered.bootstrap, topic, 1, -2)[0]
    remaining = tk.manifest(tiered.archive, topic, 0)
    assert remaining["segments"] == [] and remaining["log_start_offset"] == earliest
    directory = tk.archive_dir(tiered.archive, topic, 0)
    tk.wait_for(lambda: not list(directory.glob(f"{first['base_offset']:020d}-{first['id']}.*")), 10,
                "the expired segment's objects deleted")
    end = len(msgs)
    got = tk.consume("confluent", kt, tiered.bootstrap, topic, {0: earliest}, {0: end})
    assert [r.offset for r in got] == list(range(earliest, end))
    assert [r.value for r in got] == [m.value for m in msgs[earliest:]]


def test_read_committed_from_the_archive_skips_aborted_transactions(kt, tiered):
    ck = kt.require_module("confluent_kafka")
    kt.require_module("kafka")
    topic = kt.topic_name("tiered", "txn")
    tk.create_topic(tiered.bootstrap, topic, 1, configs={"segment.bytes": "8192"})
    producer = ck.Producer({"bootstrap.servers": tiered.bootstrap, "transactional.id": f"tiered-{topic}",
                            "linger.ms": 0, "batch.size": 4096})
    producer.init_transactions(30)
    hour_ago = int(time.time() * 1000) - 3_600_000
    committed = []
    for t in range(12):
        producer.begin_transaction()
        values = [f"t{t}-{i}-".encode() + b"x" * 900 for i in range(3)]
        for v in values:
            producer.produce(topic, value=v, partition=0, timestamp=hour_ago + t)
        if t % 3 == 1:
            producer.flush(30)  # librdkafka purges records not sent yet on abort: they must be in the log
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += values
    tk.wait_archived(tiered.data_dir, tiered.archive, topic, 1, min_segments=3)
    segments = tk.manifest(tiered.archive, topic, 0)["segments"]
    assert any(s["txn_index_size"] for s in segments), "the archive holds aborted transactions"
    end = tk.list_offsets_raw(tiered.bootstrap, topic, 1, -1)[0]
    for family in ("confluent", "kafka-python"):
        got = tk.consume(family, kt, tiered.bootstrap, topic, {0: 0}, {0: end}, isolation="read_committed")
        assert [r.value for r in got] == committed, f"{family} read_committed from the archive"


@pytest.mark.parametrize("family", ("confluent", "kafka-python"))
def test_view_of_an_archived_topic_filters_the_archive(kt, tiered, family):
    """A filtered view whose source is tiered: a read from offset 0 is served from the archive and
    filtered there, so the view's consumer gets exactly the matching records, at their offsets."""
    kt.require_module(tk.MODULES[family])
    tag = "view" + family.replace("-", "")
    topic, msgs, local_starts = _setup(kt, tiered, tag, partitions=1, per_partition=40)
    assert local_starts[0] > 8, "the first records must be in the archive only"
    view = kt.topic_name("tiered-view", tag)
    # even record indexes carry h-idx "0", "2", ...; the last one (39) and a few in the archive match
    wanted = {0, 4, 6, 39}
    expression = " or ".join(f'header.h-idx == "{j}"' for j in sorted(wanted))
    from kbroker.admin.client import AdminClient

    with AdminClient(tiered.bootstrap, timeout=15) as admin:
        admin.create_topic(view, partitions=1, replication_factor=1,
                           configs={"view.source": topic, "view.filter": expression})
    got = tk.consume(family, kt, tiered.bootstrap, view, {0: 0}, {0: 40})
    assert [(r.offset, r.key, r.value) for r in got] == \
        [(j, msgs[j].key, msgs[j].value) for j in sorted(wanted)]
