"""DescribeLogDirs from the command-line tools: how many bytes each broker holds of a partition.

Every broker answers for its own logs only, so the sizes of a partition's replicas come from the
brokers hosting them, each asked on a connection of its own (in parallel, with a short timeout):
a broker that is paused or slow makes its sizes unknown, never the command slow.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Mapping

from kio.schema.errors import ErrorCode

from kbroker.admin.client import DESCRIBE_LOG_DIRS, AdminError, Broker, Connection, KafkaErrorResponse, TopicPartition

LOG_DIRS_TIMEOUT_S = 5.0


def describe_log_dirs(conn: Connection, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, int]:
    """The size in bytes of each partition the broker holds (of `partitions`; None: all of them),
    summed over its log directories (a partition is in one, unless it is moving between them)."""
    topics = None
    if partitions is not None:
        wanted: dict[str, list[int]] = {}
        for topic, p in sorted(set(partitions)):
            wanted.setdefault(topic, []).append(p)
        topics = [{"topic": t, "partitions": ps} for t, ps in wanted.items()]
    body = conn.call(DESCRIBE_LOG_DIRS, {"topics": topics})
    if getattr(body, "error_code", ErrorCode.none) != ErrorCode.none:
        raise KafkaErrorResponse(body.error_code, f"DescribeLogDirs from {conn.address}")
    sizes: dict[TopicPartition, int] = {}
    for result in body.results:
        if result.error_code != ErrorCode.none:
            continue  # an offline log dir: its partitions are unknown here
        for t in result.topics:
            for p in t.partitions:
                if not p.is_future_key:
                    tp = (t.name, int(p.partition_index))
                    sizes[tp] = sizes.get(tp, 0) + int(p.partition_size)
    return sizes


def partition_sizes(brokers: Mapping[int, Broker], wanted: Mapping[int, Iterable[TopicPartition]],
                    timeout: float = LOG_DIRS_TIMEOUT_S, security: Any = None) -> dict[int, dict[TopicPartition, int] | str]:
    """Ask each broker of `wanted` (by id) for the sizes of its partitions, all at once: broker id
    -> sizes, or why they are unknown (one line). `security`: the connections' (AdminClient.security)."""
    def ask(broker_id: int) -> dict[TopicPartition, int] | str:
        broker = brokers.get(broker_id)
        if broker is None:
            return "offline"
        try:
            conn = Connection(broker.host, broker.port, timeout, security)
        except AdminError as exc:
            return str(exc)
        try:
            return describe_log_dirs(conn, wanted[broker_id])
        except AdminError as exc:
            return str(exc)
        finally:
            conn.close()

    ids = sorted(wanted)
    if not ids:
        return {}
    with ThreadPoolExecutor(max_workers=min(len(ids), 16)) as pool:
        return dict(zip(ids, pool.map(ask, ids)))
