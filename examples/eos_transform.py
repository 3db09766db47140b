"""Exactly-once consume-transform-produce (confluent-kafka): read a topic in a consumer group,
write each record's value upper-cased (same key) to another topic, and commit the consumed
offsets in the same transaction as the output.

    python examples/eos_transform.py --bootstrap 127.0.0.1:9092 --input orders --output orders-upper \\
        --group upper --instance-id upper-1

Each polled batch is one transaction: begin, produce the transformed records, hand the consumer's
positions to the transaction (send_offsets_to_transaction), commit. A crash at any point leaves
either the whole batch (its output and its offsets) or none of it: readers with
isolation.level=read_committed never see the output of an aborted or unfinished transaction, and
the group resumes from the last committed batch. Run each concurrent instance with its own
--instance-id: it is the consumer's group.instance.id (a restarted instance gets its partitions
back without a rebalance) and part of the producer's transactional.id (the restarted instance
fences its dead predecessor and aborts what it left open).

Prints one line per committed transaction: `committed <records> <partition>:<next offset> ...`.
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

EXIT_FATAL = 3      # the producer was fenced or hit a fatal error: another instance owns this id now
EXIT_ABORTS = 4     # MAX_ABORTS transactions in a row aborted: something is persistently wrong
MAX_ABORTS = 10


def transform(value: bytes | None) -> bytes | None:
    return None if value is None else value.upper()


def rewind(consumer: Consumer) -> None:
    """Seek every assigned partition back to its committed offset (the start of the aborted
    batch), or to the beginning if the group has committed nothing for it."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


def retrying(call) -> None:
    """Call again while librdkafka says the error is retriable (e.g. a coordinator loading or a
    commit timed out with its outcome unknown); any other error is the caller's."""
    while True:
        try:
            return call()
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
            time.sleep(0.1)


def run_batch(consumer: Consumer, producer: Producer, output: str, batch: list) -> int:
    """One transaction: the batch's transformed records and the positions after it."""
    producer.begin_transaction()
    consumed = set()
    for msg in batch:
        if msg.error():
            raise KafkaException(msg.error())
        headers = msg.headers()
        producer.produce(output, key=msg.key(), value=transform(msg.value()), **({"headers": headers} if headers else {}))
        consumed.add((msg.topic(), msg.partition()))
    # the positions (next offsets to read) of the partitions this batch came from
    positions = consumer.position([TopicPartition(t, p) for t, p in sorted(consumed)])
    retrying(lambda: producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata()))
    retrying(producer.commit_transaction)
    return len(batch)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--instance-id", default="eos-transform-1",
                    help="group.instance.id, and the transactional.id is <group>-<instance id>: one per instance")
    ap.add_argument("--batch-size", type=int, default=500, help="most records per transaction")
    ap.add_argument("--session-timeout-ms", type=int, default=45000,
                    help="how long the group keeps a dead instance's partitions for it to come back")
    ap.add_argument("--idle-exit-s", type=float, default=0,
                    help="exit once no record came for this long (0: run until interrupted)")
    args = ap.parse_args()

    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "group.instance.id": args.instance_id,
        "session.timeout.ms": args.session_timeout_ms, "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    producer = Producer({
        "bootstrap.servers": args.bootstrap, "transactional.id": f"{args.group}-{args.instance_id}",
    })
    producer.init_transactions(60)  # fences a predecessor with the same id and aborts its transaction
    consumer.subscribe([args.input])
    idle_since = time.monotonic()
    aborts = 0
    try:
        while True:
            batch = consumer.consume(args.batch_size, 1.0)
            if not batch:
                if not consumer.assignment():  # still joining the group: not idle yet
                    idle_since = time.monotonic()
                elif args.idle_exit_s and time.monotonic() - idle_since > args.idle_exit_s:
                    return 0
                continue
            idle_since = time.monotonic()
            try:
                count = run_batch(consumer, producer, args.output, batch)
            except KafkaException as exc:
                err = exc.args[0]
                if err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED):
                    print(f"fatal: {err}", file=sys.stderr, flush=True)
                    return EXIT_FATAL
                if not err.txn_requires_abort():
                    raise
                # abortable (a partition or the group's offsets could not be written): undo the batch
                # and read it again from the group's committed offsets
                print(f"aborting the batch: {err}", file=sys.stderr, flush=True)
                producer.abort_transaction(60)
                aborts += 1
                if aborts >= MAX_ABORTS:
                    print(f"giving up after {aborts} aborted transactions in a row", file=sys.stderr, flush=True)
                    return EXIT_ABORTS
                rewind(consumer)
                continue
            aborts = 0
            ends = " ".join(f"{tp.partition}:{tp.offset}" for tp in consumer.position(consumer.assignment())
                            if tp.offset >= 0)
            print(f"committed {count} {ends}", flush=True)
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main())
