"""A kafka-python consumer-group member for groupkit: subscribe, process, commit after each batch,
report as JSON lines; SIGTERM closes the consumer (leaving the group). Client defaults otherwise,
except the session timeout and heartbeat interval when given. Every assignment report carries the
wall time `t` of its callback, and a revocation is reported too (what is left: groupkit's
single-owner check)."""

import argparse
import json
import signal
import sys
import time

from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.errors import CommitFailedError, KafkaError

STRATEGIES = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
              "sticky": StickyPartitionAssignor}


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("group")
    ap.add_argument("topic")
    ap.add_argument("--strategy", default=None, choices=sorted(STRATEGIES))
    ap.add_argument("--instance-id", default=None)
    ap.add_argument("--session-timeout-ms", type=int, default=None)
    ap.add_argument("--heartbeat-interval-ms", type=int, default=None)
    args = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    extra = {}
    if args.strategy:
        extra["partition_assignment_strategy"] = [STRATEGIES[args.strategy]]
    if args.instance_id:
        extra["group_instance_id"] = args.instance_id
    if args.session_timeout_ms:
        extra["session_timeout_ms"] = args.session_timeout_ms
    if args.heartbeat_interval_ms:
        extra["heartbeat_interval_ms"] = args.heartbeat_interval_ms
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
                             enable_auto_commit=False, client_id=f"member-{args.group}", **extra)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            if revoked:
                kept = set(consumer.assignment()) - set(revoked)
                emit(event="assigned", partitions=sorted(tp.partition for tp in kept), t=time.time())

        def on_partitions_assigned(self, assigned):
            emit(event="assigned", partitions=sorted(tp.partition for tp in consumer.assignment()), t=time.time())

    consumer.subscribe([args.topic], listener=Listener())
    while not stop:
        # long polls: kafka-python 3.0.12 can drop a rebalance that completes as a poll times out
        batch = consumer.poll(timeout_ms=1000)
        if not batch:
            continue
        nexts = {}
        for tp, records in batch.items():
            for r in records:
                emit(event="record", partition=r.partition, offset=r.offset, key=(r.key or b"").decode())
                nexts[r.partition] = r.offset + 1
        try:
            consumer.commit()
            emit(event="committed", offsets={str(p): o for p, o in nexts.items()})
        except (CommitFailedError, KafkaError) as exc:
            print(f"commit failed: {exc!r}", file=sys.stderr)
    consumer.close()
    emit(event="closed")


if __name__ == "__main__":
    main()
