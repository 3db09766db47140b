"""The ZooKeeper adapter's batched reads and writes against a real ZooKeeper: `get_many` in
multi-read requests and `set_many` in multi-op transactions give, path by path and in order, what
one request per path gives: data and stat, None for a missing znode, the new stat, or
BadVersionError for a stale version (the rest of that transaction still written), across the
batch boundaries and under a chroot."""

from __future__ import annotations

import pytest

import clusterkit as ck
from kbroker.cluster_runner import ZooKeeperServer
from kbroker.zookeeper import client as zk_client
from kbroker.zookeeper.client import ZkClient
from kbroker.zookeeper.znodes import BadVersionError, NoNodeError

pytestmark = pytest.mark.timeout(120)

N = zk_client.READ_BATCH * 2 + 50  # three multi-reads, the last one short


@pytest.fixture
def zk(tmp_path):
    ck.require_zookeeper()
    server = ZooKeeperServer(tmp_path / "zookeeper").start()
    client = ZkClient(f"{server.connect}/kbroker-batches", 10000)
    try:
        client.start()
        yield client
    finally:
        client.close()
        server.stop()


def one_by_one(zk: ZkClient, paths: list[str]):
    out = []
    for p in paths:
        try:
            out.append(zk.get(p))
        except NoNodeError:
            out.append(None)
    return out


def test_batched_reads_and_writes_answer_path_by_path(zk):
    paths = [f"/brokers/topics/t/partitions/{i}/state" for i in range(N)]
    assert all(not isinstance(r, Exception) for r in zk.create_many([(p, f"v{i}".encode()) for i, p in enumerate(paths)]))
    wanted = paths[:10] + ["/brokers/topics/t/partitions/missing/state"] + paths[10:]
    read = zk.get_many(wanted)
    assert zk._multi_read  # this ZooKeeper (3.6+) has multi-read: the batched path was the one taken
    assert len(read) == len(wanted) and read[10] is None
    assert [(d, s.version) for d, s in (r for r in read if r is not None)] == \
        [(f"v{i}".encode(), 0) for i in range(N)]
    assert [(r[0], r[1].version) if r else None for r in read] == \
        [(r[0], r[1].version) if r else None for r in one_by_one(zk, wanted)]

    # writes: the second transaction holds one stale version; it alone fails, path by path
    stale = zk_client.WRITE_BATCH + 7
    writes = [(p, f"w{i}".encode(), 5 if i == stale else 0) for i, p in enumerate(paths)]
    results = zk.set_many(writes)
    assert isinstance(results[stale], BadVersionError)
    assert all(r.version == 1 for i, r in enumerate(results) if i != stale)
    after = zk.get_many(paths)
    assert [d for d, _ in after] == [f"v{i}".encode() if i == stale else f"w{i}".encode() for i in range(N)]
