"""DescribeLogDirs: the partitions each of this broker's log directories holds, with their sizes.

As Kafka answers it: one result per log directory (its absolute path), each hosted partition's
size (the bytes of its segments) and offset lag (how far its log end offset is behind the high
watermark, 0 for a current log; -1 for a log this broker no longer hosts as a replica); v4 adds
the volume's total and usable bytes. A request naming topics gets only those partitions; null
topics means every partition. kbroker has no future logs (AlterReplicaLogDirs is not served), so
`is_future_key` is always false.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode
from kbroker.log.topic_partition import TopicPartition

INVALID_OFFSET_LAG = -1  # Kafka's DescribeLogDirsResponse.INVALID_OFFSET_LAG


async def handle(ctx: RequestContext, request) -> dict:
    broker = ctx.broker
    wanted = None
    if request.topics is not None:
        wanted = {TopicPartition(t.topic, int(p)) for t in request.topics for p in t.partitions}
    hosted = broker.replica_manager.partitions
    by_dir: dict[Path, dict[str, list[dict]]] = {Path(d).absolute(): {} for d in broker.log_manager.log_dirs}
    for tp, log in sorted(broker.log_manager.logs.items()):
        if wanted is not None and tp not in wanted:
            continue
        topics = by_dir.get(Path(log.dir).parent.absolute())
        if topics is None:
            continue
        partition = hosted.get(tp)
        lag = INVALID_OFFSET_LAG if partition is None else max(partition.high_watermark - log.log_end_offset, 0)
        topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "partition_size": log.size_in_bytes,
                                                "offset_lag": lag, "is_future_key": False})
    results = []
    for d, topics in by_dir.items():
        try:
            usage = shutil.disk_usage(d)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        results.append({"error_code": ErrorCode.none, "log_dir": str(d), "total_bytes": total,
                        "usable_bytes": usable,
                        "topics": [{"name": name, "partitions": ps} for name, ps in topics.items()]})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}
