"""An aiokafka consumer-group member for groupkit: subscribe, process, commit after each batch,
report as JSON lines; SIGTERM stops the consumer (leaving the group). Client defaults otherwise,
except that auto-commit is off (the member commits after each batch itself) and the session timeout
and heartbeat interval when given. Every assignment report carries the wall time `t` of its
callback, and a revocation is reported too (what is left: groupkit's single-owner check)."""

import argparse
import asyncio
import json
import signal
import sys
import time

from aiokafka import AIOKafkaConsumer
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.errors import CommitFailedError, KafkaError

STRATEGIES = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
              "sticky": StickyPartitionAssignor}


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


async def run(args):
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    extra = {}
    if args.strategy:
        extra["partition_assignment_strategy"] = (STRATEGIES[args.strategy],)
    if args.instance_id:
        extra["group_instance_id"] = args.instance_id
    if args.session_timeout_ms:
        extra["session_timeout_ms"] = args.session_timeout_ms
    if args.heartbeat_interval_ms:
        extra["heartbeat_interval_ms"] = args.heartbeat_interval_ms
    consumer = AIOKafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
                                enable_auto_commit=False, client_id=f"member-{args.group}", **extra)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            if revoked:
                kept = set(consumer.assignment()) - set(revoked)
                emit(event="assigned", partitions=sorted(tp.partition for tp in kept), t=time.time())

        def on_partitions_assigned(self, assigned):
            emit(event="assigned", partitions=sorted(tp.partition for tp in consumer.assignment()), t=time.time())

    await consumer.start()
    consumer.subscribe([args.topic], listener=Listener())
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            if not batch:
                continue
            nexts = {}
            for tp, records in batch.items():
                for r in records:
                    emit(event="record", partition=r.partition, offset=r.offset, key=(r.key or b"").decode())
                    nexts[r.partition] = r.offset + 1
            try:
                await consumer.commit()
                emit(event="committed", offsets={str(p): o for p, o in nexts.items()})
            except (CommitFailedError, KafkaError) as exc:
                print(f"commit failed: {exc!r}", file=sys.stderr)
    finally:
        await consumer.stop()
    emit(event="closed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("group")
    ap.add_argument("topic")
    ap.add_argument("--strategy", default=None, choices=sorted(STRATEGIES))
    ap.add_argument("--instance-id", default=None)
    ap.add_argument("--session-timeout-ms", type=int, default=None)
    ap.add_argument("--heartbeat-interval-ms", type=int, default=None)
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
