"""Transactions in a three-broker cluster (real ZooKeeper, real kbroker processes, clusterkit):
`__transaction_state` and the data topic replicated 3 times with min.insync.replicas 2.

The broker coordinating the producer's transactional id (FindCoordinator key type 1) is kill -9'ed
in the middle of a transaction, at two points:
- before-commit: the transaction's records are acknowledged, EndTxn not sent yet; the producer then
  commits through the coordinator that takes over (or fails: then the transaction must be aborted);
- before-commit-abandoned: the same, but the producer is never heard from again: the new producer's
  InitProducerId makes the new coordinator abort the transaction it loaded as Ongoing;
- after-commit: EndTxn(commit) was answered, the markers may or may not be written: the new
  coordinator must finish the commit from `__transaction_state` (PrepareCommit replayed).
Either way the transaction ends up committed or aborted, never half-visible at read_committed (a
commit the client saw succeed must be visible); a new producer with the same id inits and commits
while the killed broker is still down; every record acknowledged in a committed transaction is read
exactly once, at its acknowledged offset, and read_uncommitted holds every acknowledged record.
"""

from __future__ import annotations

import time
import uuid

import pytest

import clusterkit as ck
import txnkit as tk

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 3
PER_TXN = 9
OVERRIDES = {
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "6",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("txn-cluster"), 3, OVERRIDES)
    yield c
    ck.stop_cluster(c)


@pytest.fixture
def producers(kt, request, tmp_path):
    started = tk.Producers(kt, request, tmp_path)
    yield started
    started.close_all()
    print(started.describe())  # shown with a failing test's report


def _leaders(cluster, topic):
    parts = ck.partitions(cluster, topic)
    leaders = {p: info["leader"] for p, info in parts.items()}
    assert len(leaders) == PARTITIONS and all(
        b >= 0 and cluster.brokers[b].running for b in leaders.values()), f"{topic} leaders {leaders}"
    return {p: cluster.brokers[b].address for p, b in leaders.items()}


def _settled_ends(cluster, topic, timeout=60):
    """(LSO, HW) per partition, from each partition's leader, once they are equal (no open transaction)."""
    last = []

    def settled():
        leaders = _leaders(cluster, topic)
        last[:] = [(tk.list_offsets(leaders, topic, range(PARTITIONS), tk.READ_COMMITTED),
                    tk.list_offsets(leaders, topic, range(PARTITIONS), tk.READ_UNCOMMITTED))]
        return last[0][0] == last[0][1]

    try:
        ck.wait_for(settled, timeout, "no open transaction on the topic")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last (LSO, HW): {last[0] if last else None}") from None
    return last[0]


def _coordinator(cluster, txn_id, not_on=None):
    """The broker coordinating `txn_id`, as every running broker's FindCoordinator answers it."""
    def agreed():
        answers = set()
        for broker in cluster.brokers.values():
            if broker.running:
                error, node, _address = tk.find_transaction_coordinator(broker.address, txn_id)
                if error:
                    return None
                answers.add(node)
        return answers.pop() if len(answers) == 1 and not_on not in answers else None

    return ck.wait_for(agreed, 60, f"every broker to name one coordinator of {txn_id}"
                       + (f" other than {not_on}" if not_on else ""))


def _all_running_and_in_sync(cluster, topic):
    """Every broker running (one an earlier test killed is started again) and in every ISR."""
    for broker in cluster.brokers.values():
        if not broker.running:
            broker.start()
    ck.wait_for(lambda: all(len(ck.partitions(cluster, topic, via=b)) == PARTITIONS for b in cluster.brokers), 60,
                f"every broker to know {topic}")
    # __transaction_state is created by the first FindCoordinator for a transactional id
    ck.wait_for(lambda: ck.in_sync(cluster, topic, PARTITIONS, 3) and (
        not ck.partitions(cluster, "__transaction_state") or ck.in_sync(cluster, "__transaction_state", 6, 3)),
        60, f"{topic} and __transaction_state with a full ISR")


def controller_knows_all(cluster):
    from kbroker.admin.client import AdminClient

    with AdminClient(cluster.brokers[ck.controller_id(cluster)].address, timeout=5) as admin:
        return len(admin.metadata([])[0]) == len(cluster.brokers)


@pytest.mark.parametrize("family,point", [("confluent", "before-commit"), ("confluent", "before-commit-abandoned"),
                                          ("confluent", "after-commit"), ("java", "after-commit")])
def test_coordinator_killed_in_the_middle_of_a_transaction(kt, request, cluster, producers, family, point):
    java = tk.require_family(kt, request, family)
    topic = f"txn-{point}-{family}-{uuid.uuid4().hex[:6]}"
    for broker in cluster.brokers.values():  # one an earlier test killed and left down when it failed
        if not broker.running:
            broker.start()
    ck.wait_for(lambda: controller_knows_all(cluster), 60, "the controller to know all 3 brokers")
    ck.create_topic(cluster, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    _all_running_and_in_sync(cluster, topic)
    txn_id = f"cluster-{family}-{point}-{uuid.uuid4().hex[:6]}"
    bootstrap = ck.live_bootstrap(cluster)

    first = producers.start(family, bootstrap, topic, txn_id, name="first")
    first.init()
    first.begin()
    before = first.send(tk.values("before", PER_TXN, PARTITIONS))
    first.commit()
    first.begin()
    middle = first.send(tk.values("middle", PER_TXN, PARTITIONS))
    coordinator = _coordinator(cluster, txn_id)

    if point.startswith("before-commit"):
        cluster.brokers[coordinator].kill()
        killed_at = time.monotonic()
        commit = first.call("commit", timeout=120) if point == "before-commit" else {"op": "none"}
    else:
        commit = first.ok("commit")
        cluster.brokers[coordinator].kill()  # the markers may still be on their way
        killed_at = time.monotonic()
    new_coordinator = _coordinator(cluster, txn_id, not_on=coordinator)

    # a new producer with the same id, while the killed broker is still down
    second = producers.start(family, ck.live_bootstrap(cluster), topic, txn_id, name="second")
    second.init()
    second.begin()
    after = second.send(tk.values("after", PER_TXN, PARTITIONS))
    second.commit()
    took = time.monotonic() - killed_at

    committed_ends, uncommitted_ends = _settled_ends(cluster, topic)
    live = ck.live_bootstrap(cluster)
    read = tk.read(family, live, topic, tk.READ_COMMITTED, committed_ends, timeout=60, java=java)
    seen_middle = read.values() & {v for _p, _o, v in middle}
    assert not seen_middle or len(seen_middle) == len(middle), (
        f"the interrupted transaction is half visible: {len(seen_middle)} of {len(middle)} records")
    if commit.get("ok"):
        assert seen_middle, f"the commit succeeded ({point}) but the transaction's records are not visible"
    if point == "before-commit-abandoned":
        assert not seen_middle, "the new producer's init did not abort the transaction left open"
    tk.check_read(read, tk.expected_by_partition(before + (middle if seen_middle else []) + after), committed_ends)
    tk.check_read(tk.read(family, live, topic, tk.READ_UNCOMMITTED, uncommitted_ends, timeout=60, java=java),
                  tk.expected_by_partition(before + middle + after), uncommitted_ends)

    # the killed broker comes back, catches up, and serves the same answers
    cluster.brokers[coordinator].start()
    _all_running_and_in_sync(cluster, topic)
    assert _settled_ends(cluster, topic) == (committed_ends, uncommitted_ends)
    print(f"{family} {point}: coordinator {coordinator} killed, {new_coordinator} took over; commit answered "
          f"{commit}; the second producer committed {took:.1f} s after the kill")
