"""Owns the `quotas` benchmark phase: do client quotas hold a greedy client to its quota while an
unthrottled client on the same broker keeps its throughput? A kbroker of its own per window
setting, with a client-id quota of QUOTA bytes/s for produce and for fetch (set with
AlterClientQuotas, kbroker/admin/quotas.py):

1. **Producers**: an unthrottled producer (another client id) alone for BASELINE_S seconds; then a
   greedy producer (client id `throttled`) and the unthrottled one together for RUN_S seconds.
   Each is a confluent-kafka producer in a process of its own (no shared GIL) sending 1 KiB values
   as fast as librdkafka takes them (linger.ms=5, librdkafka's default 1 MB batches, a 64 MB
   queue), noting when each message was acknowledged. Figures: the greedy producer's acknowledged
   MB/s over the RUN_S seconds from its first send (what the client sees, the quota window's
   initial allowance included) and over RUN_S - warm-up after one quota span (steady), as a
   fraction of the quota; the unthrottled producer's MB/s beside it as a fraction of its MB/s alone.
2. **Consumers**: a topic filled with enough data for both (the quota's RUN_S seconds and a span's
   burst, and more), then an unthrottled consumer reads all of it alone (baseline), then a greedy
   consumer (`throttled`) and the unthrottled one read it from the start together — librdkafka
   consumers with their default fetch sizes, each in its own process. The same figures.

Two brokers, one after the other: Kafka's default quota window (`quota.window.num=11` x
`quota.window.size.seconds=1`) and a short one (`quota.window.num=3`). Kafka's sampled rate lets a
client send a whole measuring span's worth before it throttles it, and again when a sample of a
burst expires: the default window's figures show what that does over 30 s.
"""

from __future__ import annotations

import multiprocessing
import shutil
import time

from benchmarks import clients
from benchmarks.broker import OwnBroker
from benchmarks.phases import Ctx, Meter, row

QUOTA = 5_000_000     # bytes/s, produce and fetch
RUN_S = 30.0
BASELINE_S = 10.0
SIZE = 1024
THROTTLED, FREE = "throttled", "unthrottled"
WINDOWS = (("default", 11), ("w3", 3))  # (label, quota.window.num), quota.window.size.seconds=1


def _producer(bootstrap: str, topic: str, client_id: str, seconds: float, go, results) -> None:
    """Child process: produce for `seconds` once `go` is set; put (start time, [ack times]) on results."""
    from confluent_kafka import Producer

    acks: list[float] = []
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "acks": "1",
                  "queue.buffering.max.kbytes": 65536, "queue.buffering.max.messages": 1000000,
                  "statistics.interval.ms": 1000, "stats_cb": lambda s: None})
    p.list_topics(topic, timeout=30)
    value = b"q" * SIZE
    go.wait()
    start = time.time()

    def acked(err, _msg):
        if err is None:
            acks.append(time.time())

    while time.time() - start < seconds:
        try:
            p.produce(topic, value, on_delivery=acked)
        except BufferError:
            p.poll(0.005)
        p.poll(0)
    p.purge()
    p.flush(5)
    results.put((client_id, start, acks))


def _consumer(bootstrap: str, topic: str, client_id: str, seconds: float, total: int, go, results) -> None:
    """Child process: read `topic` from the start for `seconds` (or until `total` bytes); put
    (start time, [(time, bytes)]) on results."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"{client_id}-{time.time()}",
                  "enable.auto.commit": False})
    c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)  # connected before the start
    go.wait()
    start = time.time()
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, n = [], 0
    while time.time() - start < seconds and n < total:
        batch = c.consume(10000, 0.1)
        size = sum(len(m.value()) for m in batch if not m.error())
        if size:
            n += size
            got.append((time.time(), size))
    c.close()
    results.put((client_id, start, got))


def _run(target, jobs: list[tuple]) -> dict[str, tuple[float, list]]:
    """Run `target(*args, go, results)` per job in processes of their own, started together."""
    mp = multiprocessing.get_context("spawn")
    go, results = mp.Event(), mp.Queue()
    procs = [mp.Process(target=target, args=(*args, go, results), daemon=True) for args in jobs]
    for p in procs:
        p.start()
    time.sleep(2.0)  # connected and waiting
    go.set()
    out = {}
    for _ in procs:
        client_id, start, events = results.get(timeout=RUN_S + 120)
        out[client_id] = (start, events)
    for p in procs:
        p.join(30)
    return out


def _rate(start: float, events: list, begin: float, end: float, sized: bool) -> float:
    """Bytes per second between `begin` and `end` seconds after `start`."""
    if sized:
        total = sum(n for t, n in events if start + begin <= t < start + end)
    else:
        total = SIZE * sum(1 for t in events if start + begin <= t < start + end)
    return total / (end - begin)


def _figures(label: str, kind: str, window_num: int, runs: dict, alone: float, sized: bool, meter: Meter) -> list[dict]:
    start, events = runs[THROTTLED]
    whole = _rate(start, events, 0, RUN_S, sized)
    steady = _rate(start, events, window_num, RUN_S, sized)
    beside = _free_rate(runs[FREE], sized)
    prefix = f"quotas.{label}.{kind}"
    return [
        row(f"{prefix}.throttled", "quotas", f"{kind} {label} window: throttled ({QUOTA / 1e6:.0f} MB/s quota)", "quota",
            {"mb_s": whole / 1e6, "ratio_to_quota": whole / QUOTA, "steady_mb_s": steady / 1e6,
             "steady_ratio_to_quota": steady / QUOTA, "quota_mb_s": QUOTA / 1e6, "window_num": window_num,
             "seconds": RUN_S, **meter.metrics()}),
        row(f"{prefix}.unthrottled", "quotas", f"{kind} {label} window: unthrottled beside it", "throughput",
            {"mb_s": beside / 1e6, "msgs_s": beside / SIZE, "alone_mb_s": alone / 1e6,
             "ratio_to_alone": beside / alone if alone else None}),
    ]


def _free_rate(run: tuple[float, list], sized: bool, seconds: float = RUN_S) -> float:
    """The unthrottled client's bytes per second: a producer's over its run after its first second
    (connection, first batches), a consumer's from its first record to its last (it stops once it
    has read everything, so its start-up would weigh on a short read)."""
    start, events = run
    if not sized:
        return _rate(start, events, 1, seconds, False)
    if len(events) < 2:
        return float("nan")
    return sum(n for _, n in events[1:]) / (events[-1][0] - events[0][0])


def _one_window(ctx: Ctx, label: str, window_num: int) -> list[dict]:
    from kbroker.admin.client import AdminClient
    from kbroker.admin.quotas import alter_client_quotas

    broker = OwnBroker(ctx.base, f"quotas-{label}", [f"quota.window.num={window_num}", *ctx.overrides], ctx.log_level)
    ctx.side_brokers.append(broker)
    broker.start()
    rows: list[dict] = []
    try:
        with AdminClient(broker.bootstrap, 30) as admin:
            answers = alter_client_quotas(admin, [({"client-id": THROTTLED}, {"producer_byte_rate": QUOTA,
                                                                               "consumer_byte_rate": QUOTA})])
            if any(code for _, code, _ in answers):
                raise RuntimeError(f"AlterClientQuotas refused: {answers}")
        stats = broker.stats()
        # 1. producers
        topic = f"bench-{ctx.run_id}-quotas-{label}-p"
        clients.create_topics(broker.bootstrap, [(topic, 1, {"file.delete.delay.ms": "0"})])
        alone = _free_rate(_run(_producer, [(broker.bootstrap, topic, FREE, BASELINE_S)])[FREE], False, BASELINE_S)
        with Meter(stats) as meter:
            runs = _run(_producer, [(broker.bootstrap, topic, THROTTLED, RUN_S), (broker.bootstrap, topic, FREE, RUN_S)])
        rows += _figures(label, "produce", window_num, runs, alone, False, meter)
        clients.delete_topics(broker.bootstrap, [topic])
        # 2. consumers: enough for the throttled one's RUN_S (and a span's burst), and more
        topic = f"bench-{ctx.run_id}-quotas-{label}-c"
        clients.create_topics(broker.bootstrap, [(topic, 1, {"file.delete.delay.ms": "0"})])
        count = int(QUOTA * (RUN_S + window_num + 10) / SIZE)
        clients.produce_run(broker.bootstrap, topic, 1, SIZE, count, "1", ctx.deadline() + 120)
        total = count * SIZE
        alone = _free_rate(_run(_consumer, [(broker.bootstrap, topic, FREE, RUN_S, total)])[FREE], True)
        with Meter(stats) as meter:
            runs = _run(_consumer, [(broker.bootstrap, topic, THROTTLED, RUN_S, total),
                                    (broker.bootstrap, topic, FREE, RUN_S, total)])
        rows += _figures(label, "consume", window_num, runs, alone, True, meter)
    finally:
        broker.stop()
        shutil.rmtree(broker.data, ignore_errors=True)
    return rows


def phase_quotas(ctx: Ctx) -> list[dict]:
    rows: list[dict] = []
    for label, window_num in WINDOWS:
        rows += _one_window(ctx, label, window_num)
    return rows
