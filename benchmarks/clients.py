"""Owns the client side of the load: topic creation/deletion (AdminClient) and the
confluent-kafka (librdkafka) producer/consumer loops. Every loop is bounded by a message count
and a deadline (time.perf_counter() value) and returns plain numbers, never raises on a slow
broker: a run that hits its deadline comes back with aborted=True and what it achieved."""

from __future__ import annotations

import logging
import multiprocessing
import os
import struct
import time
from collections import defaultdict
from typing import Callable

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an already sorted list (q in 0..100)."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(round(q / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def create_topics(bootstrap: str, specs: list[tuple[str, int, dict]], per_request: int = 10,
                  timeout: float = 120.0, replication_factor: int = 1) -> None:
    """Create topics [(name, partitions, config)], `per_request` topics per CreateTopics request."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    for i in range(0, len(specs), per_request):
        chunk = [NewTopic(n, num_partitions=p, replication_factor=replication_factor, config=dict(c))
                 for n, p, c in specs[i:i + per_request]]
        futures = admin.create_topics(chunk, operation_timeout=timeout, request_timeout=timeout)
        for name, fut in futures.items():
            fut.result(timeout=timeout)


def delete_topics(bootstrap: str, names: list[str], timeout: float = 60.0) -> None:
    if not names:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    for i in range(0, len(names), 50):
        for fut in admin.delete_topics(names[i:i + 50], operation_timeout=timeout).values():
            try:
                fut.result(timeout=timeout)
            except KafkaException:
                pass


def produce_run(bootstrap: str, topic: str, partitions: int, size: int, count: int, acks: str,
                deadline: float, linger_ms: int = 5, mode: str = "plain", txn_messages: int = 1000,
                batch_size: int = 1000000) -> dict:
    """Produce `count` messages of `size` random bytes round-robin over `partitions` partitions
    as fast as librdkafka takes them; time from the first produce() to the end of flush().

    mode "plain": no idempotence; "idempotent": enable.idempotence (acks must be "all");
    "flushed": idempotent, and flush() after every `txn_messages` messages (the transactional run's
    wait for every acknowledgement at each commit, without the transaction's requests);
    "transactional": idempotent with a transactional.id, `txn_messages` messages per transaction
    (begin_transaction, the sends, commit_transaction), init_transactions() before the timed part;
    the time then runs to the end of the last commit, and only committed messages count."""
    state = {"err": 0, "first_error": None}

    def on_delivery(err, msg):  # delivery.report.only.error: called for failures only (a Python
        state["err"] += 1       # callback per message would cost the client ~30% of its throughput)
        if state["first_error"] is None:
            state["first_error"] = str(err)

    txn = mode == "transactional"
    conf = {
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms,
        "batch.size": batch_size, "batch.num.messages": 1000000,
        "queue.buffering.max.messages": 2000000, "queue.buffering.max.kbytes": 2097151,
        "compression.type": "none", "enable.idempotence": mode != "plain",
        "message.timeout.ms": 120000, "on_delivery": on_delivery, "delivery.report.only.error": True,
    }
    if txn:  # librdkafka wants message.timeout.ms <= transaction.timeout.ms (default 60 s)
        conf.update({"transactional.id": f"{topic}-txn", "transaction.timeout.ms": 120000})
    producer = Producer(conf)
    if txn:
        producer.init_transactions(30)
    producer.list_topics(topic, timeout=30)  # connection + metadata outside the timed part
    warm_up = 0
    if mode in ("idempotent", "flushed"):  # the producer id (InitProducerId) too: one message, acknowledged
        producer.produce(topic, b"", partition=0)
        if producer.flush(30):
            raise RuntimeError(f"idempotent producer: warm-up message to {topic} not acknowledged in 30 s")
        warm_up = state["err"]
    value = os.urandom(size)
    aborted = False
    sent = committed = in_txn = failed_txns = 0
    commit_s: list[float] = []

    def commit() -> bool:
        """Commit the open transaction; False if the run must stop (fatal error, deadline)."""
        nonlocal committed, in_txn, failed_txns
        c0 = time.perf_counter()
        while True:
            try:
                producer.commit_transaction(max(1.0, deadline - time.perf_counter()))
                committed += in_txn
                break
            except KafkaException as exc:
                err = exc.args[0]
                state["first_error"] = state["first_error"] or f"commit_transaction: {err}"
                if err.retriable() and time.perf_counter() < deadline:
                    continue
                failed_txns += 1
                if not err.txn_requires_abort():
                    return False
                producer.abort_transaction(30)
                break
        commit_s.append(time.perf_counter() - c0)
        in_txn = 0
        return True

    t0 = time.perf_counter()
    for i in range(count):
        if not i & 1023:
            producer.poll(0)
            if time.perf_counter() > deadline:
                aborted = True
                break
        if txn and in_txn == 0:
            producer.begin_transaction()
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.005)
                if time.perf_counter() > deadline:
                    aborted = True
                    break
        if aborted:
            break
        sent += 1
        if mode == "flushed" and not sent % txn_messages:
            producer.flush(max(0.5, deadline - time.perf_counter()))
        if txn:
            in_txn += 1
            if in_txn == txn_messages and not commit():
                aborted = True
                break
    if txn and in_txn and not aborted:
        aborted = not commit()
    left = producer.flush(max(0.5, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - t0
    if txn and in_txn:  # stopped inside a transaction: it does not count
        try:
            producer.abort_transaction(10)
        except KafkaException:
            pass
    if left:
        aborted = True
        producer.purge()
        producer.flush(5)
    # acknowledged = handed over - still queued - failed; in transactions, what was committed
    ok = committed if txn else sent - left - (state["err"] - warm_up)
    errors = max(state["err"], sent - committed - in_txn) if txn else state["err"]
    out = {"messages": ok, "bytes": ok * size, "seconds": elapsed, "msgs_s": ok / elapsed,
           "mb_s": ok * size / elapsed / 1e6, "errors": errors, "first_error": state["first_error"],
           "aborted": aborted}
    if txn:
        commit_s.sort()
        ms = [x * 1000 for x in commit_s]
        out.update({"transactions": len(commit_s), "failed_transactions": failed_txns,
                    "txn_messages": txn_messages, "commit_p50_ms": percentile(ms, 50),
                    "commit_p99_ms": percentile(ms, 99), "commit_max_ms": ms[-1] if ms else None,
                    "commit_total_s": sum(commit_s)})
    return out


def _consumer(bootstrap: str, **extra) -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": "kbroker-bench", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "enable.partition.eof": False}
    conf.update(extra)
    return Consumer(conf)


class _QueueFullCounter(logging.Handler):
    """Counts librdkafka's "Fetch backoff ...: Local: Queue full" debug lines (debug=fetch): each is a
    partition whose local queue reached queued.max.messages.kbytes and will not be fetched for
    fetch.queue.backoff.ms."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "Queue full" in record.getMessage():
            self.count += 1


_LIBRDKAFKA_LOG = logging.getLogger("benchmarks.librdkafka")  # librdkafka's debug lines, counted, not shown
_LIBRDKAFKA_LOG.propagate = False
_LIBRDKAFKA_LOG.setLevel(logging.DEBUG)


def consume_run(bootstrap: str, topic: str, partitions: int, deadline: float, isolation: str | None = None,
                expected: int | None = None, poll_s: float = 0.5, extra: dict | None = None,
                defaults: bool = False) -> dict:
    """Read a topic from the earliest offset to its current end (assign, no group protocol).
    MB/s is counted from the first message received to the last. `isolation`: librdkafka's
    isolation.level (its default, read_committed, when None); `expected`: the number of messages
    to read (default: high - low watermark, which counts a transactional topic's control records);
    `poll_s`: how long one consume() call may wait for its 10,000 messages (a sparse read, such as
    a filtered view's, would otherwise wait that long on every call); `extra`: more consumer settings
    (the downconvert phase's old-protocol client); `defaults`: librdkafka's own fetch and queue
    settings instead of the harness's larger ones, and the queue-full fetch backoffs counted from
    the client's debug log (`queue_full_backoffs`)."""
    tuned = {} if defaults else {
        "fetch.max.bytes": 67108864, "max.partition.fetch.bytes": 16777216,
        "queued.max.messages.kbytes": 262144, "queued.min.messages": 1000000,
        "receive.message.max.bytes": 100000000}
    counter = None
    if defaults:
        counter = _QueueFullCounter()
        _LIBRDKAFKA_LOG.addHandler(counter)
        tuned = {"debug": "fetch", "logger": _LIBRDKAFKA_LOG}
    consumer = _consumer(bootstrap, **{
        **tuned, **({"isolation.level": isolation} if isolation else {}), **(extra or {})})
    try:
        in_log = 0  # also connects, outside the timed part
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            in_log += high - low
        if expected is None:
            expected = in_log
        t_assign = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        count = nbytes = errors = 0
        first_error = None
        t_first = t_last = None
        aborted = False
        while count < expected:
            if time.perf_counter() > deadline:
                aborted = True
                break
            batch = consumer.consume(10000, poll_s)
            if not batch:
                continue
            if t_first is None:
                t_first = time.perf_counter()
            for m in batch:
                if m.error():
                    errors += 1
                    first_error = first_error or str(m.error())
                    continue
                count += 1
                nbytes += len(m.value())
            t_last = time.perf_counter()
    finally:
        consumer.close()
        if counter is not None:
            _LIBRDKAFKA_LOG.removeHandler(counter)
    elapsed = (t_last - t_first) if t_first and t_last and t_last > t_first else float("nan")
    return {"messages": count, "expected": expected, "bytes": nbytes, "seconds": elapsed,
            "msgs_s": count / elapsed, "mb_s": nbytes / elapsed / 1e6,
            "first_message_s": (t_first - t_assign) if t_first else None,
            "errors": errors, "first_error": first_error, "aborted": aborted,
            **({"queue_full_backoffs": counter.count} if counter else {})}


_E2E = struct.Struct(">bqq")  # kind (0 warm-up, 1 measured), sequence, send time (perf_counter_ns)


def _e2e_consumer(bootstrap: str, topic: str, warm, stop, conn) -> None:
    """Child process: read the topic with librdkafka's default fetch settings, send back
    receive time - send time (ns) of every measured message. perf_counter_ns is CLOCK_MONOTONIC,
    the same clock in both processes."""
    latencies, errors = [], []
    c = _consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while not stop.is_set():
            m = c.poll(0.05)  # returns as soon as a message is there
            now = time.perf_counter_ns()
            if m is None:
                continue
            if m.error():
                errors.append(str(m.error()))
                continue
            kind, _, sent = _E2E.unpack_from(m.value())
            if kind == 1:
                latencies.append(now - sent)
            else:
                warm.set()
    finally:
        c.close()
        conn.send((latencies, errors))
        conn.close()


def e2e_run(bootstrap: str, topic: str, rate: float, count: int, size: int, deadline: float) -> dict:
    """Send `count` messages at `rate` msg/s (linger.ms=0, acks=1), each carrying its send time;
    a consumer in a second process (default fetch.wait.max.ms) records receive time - send time."""
    mp = multiprocessing.get_context("spawn")  # no fork of a process running librdkafka threads
    warm, stop = mp.Event(), mp.Event()
    parent_conn, child_conn = mp.Pipe(duplex=False)
    proc = mp.Process(target=_e2e_consumer, args=(bootstrap, topic, warm, stop, child_conn),
                      name="e2e-consumer", daemon=True)
    proc.start()
    child_conn.close()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0,
                         "enable.idempotence": False, "compression.type": "none"})
    pad = b"\0" * max(0, size - _E2E.size)
    aborted = False
    sent = 0
    send_seconds = 0.0
    latencies, errors = [], []
    try:
        warm_deadline = min(deadline, time.perf_counter() + 30)
        while not warm.is_set():  # consumer connected and fetching before we measure
            producer.produce(topic, _E2E.pack(0, 0, 0) + pad, partition=0)
            producer.poll(0)
            if warm.wait(0.05):
                break
            if time.perf_counter() > warm_deadline:
                raise TimeoutError("e2e: consumer never received a warm-up message")
        time.sleep(0.5)
        start = time.perf_counter()
        for i in range(count):
            target = start + i / rate
            now = time.perf_counter()
            if now > deadline:
                aborted = True
                break
            if target > now:
                time.sleep(target - now)
            producer.produce(topic, _E2E.pack(1, i, time.perf_counter_ns()) + pad, partition=0)
            producer.poll(0)
            sent += 1
        send_seconds = time.perf_counter() - start
        producer.flush(10)
        time.sleep(min(3.0, max(0.5, deadline - time.perf_counter())))  # let the last ones arrive
    finally:
        stop.set()
        if parent_conn.poll(15):
            latencies, errors = parent_conn.recv()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
    lat = sorted(x / 1e6 for x in latencies)
    return {"sent": sent, "received": len(lat), "rate": sent / send_seconds if sent else 0,
            "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99), "max_ms": lat[-1] if lat else None,
            "errors": len(errors) + (sent - len(lat)), "first_error": errors[0] if errors else
            (f"{sent - len(lat)} messages not received" if sent != len(lat) else None), "aborted": aborted}


def produce_latency_run(bootstrap: str, topic: str, count: int, size: int, deadline: float) -> dict:
    """Sequential acks=all produce: produce one message, flush, repeat. The wall time of
    produce()+flush() is the round trip; librdkafka's own msg.latency() is kept beside it."""
    rd_lat: list[float] = []
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        elif msg.latency() is not None:
            rd_lat.append(msg.latency() * 1000)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": False, "compression.type": "none",
                         "on_delivery": on_delivery})
    value = os.urandom(size)
    for _ in range(20):  # warm-up: connection, metadata
        producer.produce(topic, value, partition=0)
        producer.flush(10)
    rd_lat.clear()
    wall: list[float] = []
    aborted = False
    for _ in range(count):
        if time.perf_counter() > deadline:
            aborted = True
            break
        t0 = time.perf_counter_ns()
        producer.produce(topic, value, partition=0)
        left = producer.flush(5)
        wall.append((time.perf_counter_ns() - t0) / 1e6)
        if left:
            errors.append("flush timed out after 5 s")
            aborted = True
            break
    wall.sort()
    rd_lat.sort()
    return {"requests": len(wall), "p50_ms": percentile(wall, 50), "p99_ms": percentile(wall, 99),
            "max_ms": wall[-1] if wall else None, "rdkafka_p50_ms": percentile(rd_lat, 50),
            "rdkafka_p99_ms": percentile(rd_lat, 99), "errors": len(errors),
            "first_error": errors[0] if errors else None, "aborted": aborted}


_SEQ = struct.Struct(">q")


class PacedProducer:
    """An idempotent acks=all librdkafka producer sending `size`-byte messages at a steady `rate`
    (msg/s), round-robin over `partitions`, for the failover runs. Every message's key is its
    sequence number; the harness records when each was handed to librdkafka and when (and at which
    partition/offset) it was acknowledged, or the error it failed with. Acknowledgement times are
    taken in the delivery callback, which poll() runs at least once a millisecond here."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, size: int, rate: float, linger_ms: int = 5,
                 **config):
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.value = os.urandom(size)
        self.sent_at: list[float] = []                 # seq -> perf_counter() at produce()
        self.acks: list[tuple[float, int, int, int]] = []  # (perf_counter() at ack, seq, partition, offset)
        self.errors: list[str] = []
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": linger_ms,
            "compression.type": "none", "message.timeout.ms": 120000, "log_level": 3,
            "on_delivery": self._delivered, **config})
        self.producer.list_topics(topic, timeout=30)
        self.t0: float | None = None
        self.watch_from: float | None = None
        self.first_after: tuple[float, int] | None = None  # (ack time, seq): see watch()

    def watch(self, t: float) -> None:
        """From now on, note the first acknowledgement of a message handed over after `t`."""
        self.watch_from, self.first_after = t, None

    def _delivered(self, err, msg) -> None:
        now = time.perf_counter()
        if err is not None:
            self.errors.append(str(err))
            return
        seq = _SEQ.unpack(msg.key())[0]
        self.acks.append((now, seq, msg.partition(), msg.offset()))
        if self.first_after is None and self.watch_from is not None and self.sent_at[seq] > self.watch_from:
            self.first_after = (now, seq)

    def run_until(self, done: Callable[[], bool], deadline: float) -> bool:
        """Keep sending at the rate until done() is true (True) or the deadline passes (False)."""
        if self.t0 is None:
            self.t0 = time.perf_counter()
        while True:
            now = time.perf_counter()
            due = int((now - self.t0) * self.rate) + 1
            while len(self.sent_at) < due:
                seq = len(self.sent_at)
                try:
                    self.producer.produce(self.topic, self.value, _SEQ.pack(seq), partition=seq % self.partitions)
                except BufferError:
                    break  # queue full: try again after the next poll
                self.sent_at.append(time.perf_counter())
            self.producer.poll(0.001)
            if done():
                return True
            if time.perf_counter() > deadline:
                return False

    def finish(self, flush_s: float = 30.0) -> int:
        """Flush; return the number of messages still unacknowledged after `flush_s` (then purged)."""
        left = self.producer.flush(flush_s)
        if left:
            self.producer.purge()
            self.producer.flush(5)
        return left

    def acks_by_partition(self) -> dict[int, list[float]]:
        out: dict[int, list[float]] = defaultdict(list)
        for at, _, partition, _ in self.acks:
            out[partition].append(at)
        return {p: sorted(v) for p, v in out.items()}


def verify_acknowledged(bootstrap: str, topic: str, partitions: int, acks: list[tuple[float, int, int, int]],
                        deadline: float) -> dict:
    """Read the topic from the start to its end (assign, no group) and check every acknowledged
    message is there at the partition and offset it was acknowledged with, and no message twice."""
    consumer = _consumer(bootstrap, **{"enable.partition.eof": True})
    at: dict[tuple[int, int], int] = {}
    seen: dict[int, int] = defaultdict(int)
    errors: list[str] = []
    try:
        ends = {}
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        done = {p for p, high in ends.items() if high == 0}
        while len(done) < partitions and time.perf_counter() < deadline:
            for m in consumer.consume(10000, 0.5):
                if m.error():
                    if m.error().code() != -191:  # _PARTITION_EOF
                        errors.append(str(m.error()))
                    continue
                seq = _SEQ.unpack(m.key())[0]
                at[(m.partition(), m.offset())] = seq
                seen[seq] += 1
                if m.offset() + 1 >= ends[m.partition()]:
                    done.add(m.partition())
    finally:
        consumer.close()
    where = {(p, seq) for (p, _), seq in at.items()}
    # an acknowledgement without an offset (librdkafka reports none for a batch it learned was
    # already persisted) is checked by presence in its partition
    lost = [(seq, p, o) for _, seq, p, o in acks if (at.get((p, o)) != seq if o is not None and o >= 0
                                                       else (p, seq) not in where)]
    duplicates = sum(1 for n in seen.values() if n > 1)
    return {"read": len(at), "lost": len(lost), "duplicates": duplicates, "read_errors": len(errors),
            "acked_without_offset": sum(1 for a in acks if a[3] is None or a[3] < 0),
            "read_complete": len(done) == partitions,
            "first_problem": (f"acknowledged seq {lost[0][0]} not at partition {lost[0][1]} offset {lost[0][2]}"
                              if lost else errors[0] if errors else None)}
