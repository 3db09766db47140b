"""Transactions on the single node, written once and parametrized over the client families
(txnkit.py: a transactional-producer adapter and a reader per family: confluent-kafka, the Java
kafka-clients 3.9 KafkaProducer/KafkaConsumer, aiokafka, kafka-python).

1. commit, abort, commit: every producer family writes a committed, an aborted and a committed
   transaction over two partitions; the acknowledged offsets leave one gap per transaction and
   partition (its marker); every reader family sees exactly the committed records in order at
   read_committed and every record at read_uncommitted, no control record, positions at the end.
2. fencing: a second producer with the same transactional id fences the first; the first's next
   send or commit fails with the family's fenced error, its open transaction is aborted, the second
   commits.
3. a transaction left open past its transaction.timeout.ms is aborted by the broker: the last
   stable offset stays at its first record while it is open, then moves on; records another
   producer committed after it become visible, its own never do.
4. SIGKILL of the broker in the middle of a transaction, restart on the same data dir: the
   transaction is all or nothing at read_committed; the old producer's commit, or a new producer
   with the same id, goes on from there.
5. offsets sent to a transaction (TxnOffsetCommit) appear in the group (OffsetFetch, and a member's
   committed() asking for stable offsets) only after the commit, and not at all after an abort.
"""

from __future__ import annotations

import time
import uuid

import pytest

import txnkit as tk

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 2
PER_TXN = 6  # records per transaction, 3 per partition
TIMEOUT_MS = 3000  # the short transaction.timeout.ms of test 3
KBROKER_OVERRIDES = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",  # Kafka: every 10 s
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture
def producers(kt, request, tmp_path):
    started = tk.Producers(kt, request, tmp_path)
    yield started
    started.close_all()
    print(started.describe())  # pytest shows a test's captured teardown output when it failed


@pytest.fixture
def reader(kt, request):
    def read(family, broker, topic, isolation, ends):
        java = tk.require_family(kt, request, family)
        return tk.read(family, broker.bootstrap, topic, isolation, ends, java=java)

    return read


def _topic(kt, broker, tag, partitions=PARTITIONS):
    kafka = kt.require_module("kafka")
    topic = kt.topic_name("txn", tag)
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([kafka.admin.NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    return topic


def _ends(broker, topic, partitions=PARTITIONS):
    committed = tk.list_offsets(broker.bootstrap, topic, range(partitions), tk.READ_COMMITTED)
    uncommitted = tk.list_offsets(broker.bootstrap, topic, range(partitions), tk.READ_UNCOMMITTED)
    return committed, uncommitted


def _settled_ends(kt, broker, topic, partitions=PARTITIONS, timeout=15):
    return tk.settled_ends(kt, broker.bootstrap, topic, range(partitions), timeout)


def _check(result, expected_acks, ends):
    tk.check_read(result, tk.expected_by_partition(expected_acks), ends)
    if result.client_end_offsets is not None:
        assert result.client_end_offsets == ends, (
            f"{result.family} {result.isolation}: the client's end offsets {result.client_end_offsets} "
            f"!= ListOffsets {ends}")


# --------------------------------------------------------------------------------------------
# 1. commit, abort, commit


@pytest.fixture(scope="module")
def written():
    """producer family -> (topic, committed acks, aborted acks), or the exception its run raised."""
    return {}


def _write_commit_abort_commit(kt, kbroker, producers, family):
    topic = _topic(kt, kbroker, f"cac-{family}")
    p = producers.start(family, kbroker.bootstrap, topic, f"cac-{family}-{uuid.uuid4().hex[:6]}")
    p.init()
    txns = []
    for n, commit in enumerate((True, False, True)):
        p.begin()
        acks = p.send(tk.values(f"{family}-t{n}{'c' if commit else 'a'}", PER_TXN, PARTITIONS))
        p.commit() if commit else p.abort()
        txns.append((commit, acks))
    p.close()
    # per partition: each transaction's records are dense, then its marker takes one offset
    per_partition = PER_TXN // PARTITIONS
    for n, (_commit, acks) in enumerate(txns):
        for partition in range(PARTITIONS):
            offsets = [o for p_, o, _v in acks if p_ == partition]
            first = n * (per_partition + 1)
            assert offsets == list(range(first, first + per_partition)), (
                f"transaction {n} on partition {partition} acknowledged at {offsets}, expected "
                f"{list(range(first, first + per_partition))} (one marker after each transaction)")
    _committed, uncommitted = _settled_ends(kt, kbroker, topic)
    log_end = 3 * (per_partition + 1)
    assert uncommitted == dict.fromkeys(range(PARTITIONS), log_end), f"high watermarks {uncommitted}"
    return (topic, [a for c, acks in txns if c for a in acks], [a for c, acks in txns if not c for a in acks])


@pytest.mark.parametrize("isolation", [tk.READ_COMMITTED, tk.READ_UNCOMMITTED])
@pytest.mark.parametrize("consumer", tk.FAMILIES)
@pytest.mark.parametrize("producer", tk.FAMILIES)
def test_commit_abort_commit(kt, kbroker, producers, reader, written, producer, consumer, isolation):
    if producer not in written:
        try:
            written[producer] = _write_commit_abort_commit(kt, kbroker, producers, producer)
        except BaseException as exc:
            written[producer] = exc
            raise
    if isinstance(written[producer], BaseException):
        pytest.fail(f"the {producer} producer's transactions failed in an earlier test: {written[producer]!r}"[:2000],
                    pytrace=False)
    topic, committed, aborted = written[producer]
    ends = tk.list_offsets(kbroker.bootstrap, topic, range(PARTITIONS), isolation)
    result = reader(consumer, kbroker, topic, isolation, ends)
    _check(result, committed if isolation == tk.READ_COMMITTED else committed + aborted, ends)


# --------------------------------------------------------------------------------------------
# 2. fencing


@pytest.mark.parametrize("family", tk.FAMILIES)
def test_second_producer_fences_the_first(kt, kbroker, producers, reader, family):
    topic = _topic(kt, kbroker, f"fence-{family}")
    txn_id = f"fence-{family}-{uuid.uuid4().hex[:6]}"
    first = producers.start(family, kbroker.bootstrap, topic, txn_id, name="first")
    first.init()
    first.begin()
    open_acks = first.send(tk.values("first-open", PER_TXN, PARTITIONS))  # flushed: on the broker

    second = producers.start(family, kbroker.bootstrap, topic, txn_id, name="second")
    second.init()  # fences the first and aborts its open transaction
    second.begin()
    second_acks = second.send(tk.values("second", PER_TXN, PARTITIONS))
    second.commit()

    late_send = first.call(tk.send_command(tk.values("first-late", 2, PARTITIONS)))
    late_commit = first.call("commit")
    assert not late_commit.get("ok"), f"the fenced producer's commit succeeded\n{first.describe()}"
    assert tk.fenced(family, late_send) or tk.fenced(family, late_commit), (
        f"neither the fenced producer's send ({late_send}) nor its commit ({late_commit}) failed with "
        f"{family}'s fenced error {sorted(tk.FENCED[family])}")

    committed_ends, uncommitted_ends = _settled_ends(kt, kbroker, topic)
    _check(reader(family, kbroker, topic, tk.READ_COMMITTED, committed_ends), second_acks, committed_ends)
    # the late send never reached the log: read_uncommitted holds the aborted and the committed records only
    _check(reader(family, kbroker, topic, tk.READ_UNCOMMITTED, uncommitted_ends), open_acks + second_acks,
           uncommitted_ends)


# --------------------------------------------------------------------------------------------
# 3. transaction timeout


@pytest.mark.parametrize("family", ["confluent", "java"])
def test_open_transaction_past_its_timeout_is_aborted(kt, kbroker, producers, reader, family):
    kafka = kt.require_module("kafka")
    topic = _topic(kt, kbroker, f"timeout-{family}", partitions=1)
    stalled = producers.start(family, kbroker.bootstrap, topic, f"stalled-{uuid.uuid4().hex[:6]}",
                              timeout_ms=TIMEOUT_MS, name="stalled")
    other = producers.start(family, kbroker.bootstrap, topic, f"other-{uuid.uuid4().hex[:6]}", name="other")
    stalled.init()
    other.init()

    stalled.begin()
    started = time.monotonic()
    open_acks = stalled.send(tk.values("stalled", 3, 1))
    other.begin()
    other_acks = other.send(tk.values("other", 3, 1))
    other.commit()
    lso = tk.list_offsets(kbroker.bootstrap, topic, [0], tk.READ_COMMITTED)
    hw = tk.list_offsets(kbroker.bootstrap, topic, [0], tk.READ_UNCOMMITTED)
    consumer = kafka.KafkaConsumer(bootstrap_servers=kbroker.bootstrap, isolation_level="read_committed",
                                   request_timeout_ms=15000)
    try:
        client_lso = consumer.end_offsets([kafka.TopicPartition(topic, 0)])
    finally:
        consumer.close()
    open_for = time.monotonic() - started
    assert open_for < TIMEOUT_MS / 1000, f"the checks of the open transaction took {open_for:.1f} s, past its timeout"
    first_open = open_acks[0][1]
    assert hw == {0: len(open_acks) + len(other_acks) + 1}, f"high watermark {hw}"
    assert lso == {0: first_open}, f"last stable offset {lso} while the transaction from offset {first_open} is open"
    assert list(client_lso.values()) == [first_open], f"kafka-python read_committed end_offsets {client_lso}"

    kt.wait_until(lambda: tk.list_offsets(kbroker.bootstrap, topic, [0], tk.READ_COMMITTED)
                  == tk.list_offsets(kbroker.bootstrap, topic, [0], tk.READ_UNCOMMITTED),
                  TIMEOUT_MS / 1000 + 15, "the broker to abort the timed-out transaction (LSO == HW)")
    aborted_after = time.monotonic() - started
    assert aborted_after >= TIMEOUT_MS / 1000 * 0.9, f"aborted after {aborted_after:.1f} s, before its timeout"

    committed_ends, uncommitted_ends = _settled_ends(kt, kbroker, topic, 1)
    _check(reader(family, kbroker, topic, tk.READ_COMMITTED, committed_ends), other_acks, committed_ends)
    _check(reader(family, kbroker, topic, tk.READ_UNCOMMITTED, uncommitted_ends), open_acks + other_acks,
           uncommitted_ends)
    late_commit = stalled.call("commit")
    assert not late_commit.get("ok"), "the timed-out transaction's commit succeeded"
    assert tk.fenced(family, late_commit), (
        f"the timed-out producer's commit failed with {late_commit}, not {family}'s fenced error")


# --------------------------------------------------------------------------------------------
# 4. broker restart in the middle of a transaction


@pytest.mark.parametrize("after_restart", ["old-producer-commits", "new-producer-inits"])
@pytest.mark.parametrize("family", ["confluent", "java"])
def test_broker_killed_in_the_middle_of_a_transaction(kt, fresh_kbroker, producers, reader, family, after_restart):
    broker = fresh_kbroker
    topic = _topic(kt, broker, f"restart-{family}")
    txn_id = f"restart-{family}-{uuid.uuid4().hex[:6]}"
    old = producers.start(family, broker.bootstrap, topic, txn_id, name="old")
    old.init()
    old.begin()
    before = old.send(tk.values("before", PER_TXN, PARTITIONS))
    old.commit()
    old.begin()
    middle = old.send(tk.values("middle", PER_TXN, PARTITIONS))  # acknowledged, not committed

    broker.kill()
    broker.start()

    commit = old.call("commit", timeout=90) if after_restart == "old-producer-commits" else None
    new = producers.start(family, broker.bootstrap, topic, txn_id, name="new")
    new.init()
    new.begin()
    after = new.send(tk.values("after", PER_TXN, PARTITIONS))
    new.commit()

    committed_ends, uncommitted_ends = _settled_ends(kt, broker, topic)
    read = reader(family, broker, topic, tk.READ_COMMITTED, committed_ends)
    seen_middle = read.values() & {v for _p, _o, v in middle}
    assert not seen_middle or len(seen_middle) == len(middle), (
        f"half of the interrupted transaction is visible: {sorted(seen_middle)}")
    if commit is not None and commit.get("ok"):
        assert seen_middle, "the old producer's commit succeeded after the restart but its records are not visible"
    if after_restart == "new-producer-inits":
        assert not seen_middle, "the new producer's init did not abort the interrupted transaction"
    _check(read, before + (middle if seen_middle else []) + after, committed_ends)
    _check(reader(family, broker, topic, tk.READ_UNCOMMITTED, uncommitted_ends), before + middle + after,
           uncommitted_ends)


# --------------------------------------------------------------------------------------------
# 5. offsets committed in a transaction


@pytest.mark.parametrize("family", tk.FAMILIES)
def test_offsets_sent_to_a_transaction_appear_only_after_its_commit(kt, kbroker, producers, family):
    kt.require_module("kafka")
    topic = _topic(kt, kbroker, f"offsets-{family}")
    group = f"txn-group-{family}-{uuid.uuid4().hex[:6]}"
    p = producers.start(family, kbroker.bootstrap, topic, f"offsets-{family}-{uuid.uuid4().hex[:6]}")
    p.init()

    p.begin()
    p.send(tk.values("consumed-1", 2, PARTITIONS))
    p.offsets(group, {0: 5, 1: 7})
    assert tk.group_offsets(kbroker.bootstrap, group, topic) == {}, "offsets visible before the commit"
    p.commit()
    kt.wait_until(lambda: tk.group_offsets(kbroker.bootstrap, group, topic) == {0: 5, 1: 7}, 15,
                  "the committed transaction's offsets {0: 5, 1: 7} in the group")
    assert tk.committed(kbroker.bootstrap, group, topic, range(PARTITIONS)) == {0: 5, 1: 7}

    p.begin()
    p.send(tk.values("consumed-2", 2, PARTITIONS))
    p.offsets(group, {0: 9, 1: 11})
    p.abort()
    # the abort's markers are written after abort returns: look for a while, the offsets must stay
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        assert tk.group_offsets(kbroker.bootstrap, group, topic) == {0: 5, 1: 7}, "aborted offsets became visible"
        time.sleep(0.2)
    _settled_ends(kt, kbroker, topic)
    assert tk.committed(kbroker.bootstrap, group, topic, range(PARTITIONS)) == {0: 5, 1: 7}, \
        "a group member's committed() after the abort"
