"""DescribeLogDirs: the partitions each of this broker's log directories holds, with their sizes.

As Kafka answers it: one result per log directory (its absolute path), each hosted partition's
size (the bytes of its segments) and offset lag (how far its log end offset is behind the high
watermark, 0 for a current log; -1 for a log this broker no longer hosts as a replica); v4 adds
the volume's total and usable bytes. A partition being moved to another dir (AlterReplicaLogDirs)
shows there too with `is_future_key` set and, as lag, how far its copy is behind the current log's
end. An offline dir (an I/O error took it offline) is answered KAFKA_STORAGE_ERROR and no
partitions. A request naming topics gets only those partitions; null topics means every partition.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kbroker.api.access import Op, cluster_allowed
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode
from kbroker.log.topic_partition import TopicPartition

INVALID_OFFSET_LAG = -1  # Kafka's DescribeLogDirsResponse.INVALID_OFFSET_LAG
UNKNOWN_BYTES = -1  # total and usable bytes of a dir that could not be asked


async def handle(ctx: RequestContext, request) -> dict:
    if not cluster_allowed(ctx, Op.DESCRIBE):  # Kafka: no dirs; v3+ names the reason
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "results": []}
    broker = ctx.broker
    lm = broker.log_manager
    wanted = None
    if request.topics is not None:
        wanted = {TopicPartition(t.topic, int(p)) for t in request.topics for p in t.partitions}
    hosted = broker.replica_manager.partitions
    by_dir: dict[Path, dict[str, list[dict]]] = {d: {} for d in lm.live_log_dirs}
    logs = [(tp, log, lm.dir_of(tp), False) for tp, log in lm.logs.items()]
    logs += [(tp, log, lm.future_dir_of(tp), True) for tp, log in lm.future_logs.items()]
    for tp, log, d, future in sorted(logs, key=lambda entry: (entry[0], entry[3])):
        topics = by_dir.get(d)
        if topics is None or (wanted is not None and tp not in wanted):
            continue
        partition = hosted.get(tp)
        if partition is None:
            lag = INVALID_OFFSET_LAG
        elif future:
            lag = max(partition.log_end_offset - log.log_end_offset, 0)
        else:
            lag = max(partition.high_watermark - log.log_end_offset, 0)
        topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "partition_size": log.size_in_bytes,
                                                "offset_lag": lag, "is_future_key": future})
    results = []
    for d in lm.log_dirs:
        path = str(d.absolute())
        if d not in by_dir:
            results.append({"error_code": ErrorCode.kafka_storage_error, "log_dir": path,
                            "total_bytes": UNKNOWN_BYTES, "usable_bytes": UNKNOWN_BYTES, "topics": []})
            continue
        try:
            usage = shutil.disk_usage(d)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = UNKNOWN_BYTES
        results.append({"error_code": ErrorCode.none, "log_dir": path, "total_bytes": total, "usable_bytes": usable,
                        "topics": [{"name": name, "partitions": ps} for name, ps in by_dir[d].items()]})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}
