"""A transactional producer of one Python client family, driven by txnkit.py over stdin/stdout.

    python txn_producer.py <confluent|aiokafka|kafka-python> <bootstrap> <topic> <transactional.id> <timeout_ms>

The same line protocol as `KbrokerHarness txn-producer` (the Java family): one command a line,
one JSON answer a line.

    init                         init_transactions (aiokafka: start(), which initialises the id)
    begin | commit | abort       begin_transaction / commit_transaction / abort_transaction
    send P:V[,P:V...]            produce value V (key V) to partition P, flush, await every delivery
                                 -> "acks": [[p, offset], ...] in send order
    offsets GROUP P:O[,P:O...]   send_offsets_to_transaction of the topic's partitions for GROUP
    close                        close the producer and exit 0

Answers: {"op": cmd, "ok": true, ...} or {"op": cmd, "ok": false, "error": "...", "names": [...]}
where `names` are the family's own error names (librdkafka error code names; exception classes
and their causes) so the test can tell a fenced producer from any other failure.
"""

from __future__ import annotations

import asyncio
import json
import sys

CALL_TIMEOUT_S = 30


def emit(**answer) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


def exception_names(exc: BaseException) -> list[str]:
    names, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        names.append(type(exc).__name__)
        exc = exc.__cause__ or exc.__context__
    return names


def parse_records(arg: str) -> list[tuple[int, bytes]]:
    out = []
    for pv in arg.split(","):
        p, v = pv.split(":", 1)
        out.append((int(p), v.encode()))
    return out


def parse_offsets(arg: str) -> dict[int, int]:
    return {int(p): int(o) for p, o in (po.split(":") for po in arg.split(","))}


# --------------------------------------------------------------------------------------------


class Confluent:
    def __init__(self, bootstrap: str, topic: str, txn_id: str, timeout_ms: int) -> None:
        from confluent_kafka import Producer

        self.bootstrap, self.topic = bootstrap, topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                                  "transaction.timeout.ms": timeout_ms, "acks": "all", "linger.ms": 5,
                                  # librdkafka requires message.timeout.ms <= transaction.timeout.ms
                                  "message.timeout.ms": min(CALL_TIMEOUT_S * 1000, timeout_ms)})

    @staticmethod
    def names(exc: BaseException) -> list[str]:
        """librdkafka's error names (and fatal / abortable) of the exception and its causes.
        (produce() on a fenced producer raises a SystemError whose context is the KafkaException.)"""
        from confluent_kafka import KafkaError, KafkaException

        names, seen = [], set()
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
            if isinstance(err, KafkaError):
                names += [err.name()] + (["fatal"] if err.fatal() else []) + (
                    ["abortable"] if err.txn_requires_abort() else [])
            else:
                names.append(type(exc).__name__)
            exc = exc.__cause__ or exc.__context__
        return names

    def init(self) -> None:
        self.producer.init_transactions(CALL_TIMEOUT_S)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def commit(self) -> None:
        self.producer.commit_transaction(CALL_TIMEOUT_S)

    def abort(self) -> None:
        self.producer.abort_transaction(CALL_TIMEOUT_S)

    def send(self, records: list[tuple[int, bytes]]) -> list[list[int]]:
        from confluent_kafka import KafkaException

        results: dict[int, object] = {}
        for i, (p, v) in enumerate(records):
            self.producer.produce(self.topic, key=v, value=v, partition=p,
                                  on_delivery=lambda err, msg, i=i: results.__setitem__(i, err or msg))
        # librdkafka purges what is not sent yet on abort: flush, so the records reach the broker
        left = self.producer.flush(CALL_TIMEOUT_S)
        if left:
            raise TimeoutError(f"{left} records not delivered within {CALL_TIMEOUT_S} s")
        acks = []
        for i in range(len(records)):
            r = results[i]
            if not hasattr(r, "offset"):
                raise KafkaException(r)
            acks.append([r.partition(), r.offset()])
        return acks

    def offsets(self, group: str, offsets: dict[int, int]) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            self.producer.send_offsets_to_transaction(
                [TopicPartition(self.topic, p, o) for p, o in sorted(offsets.items())],
                consumer.consumer_group_metadata(), CALL_TIMEOUT_S)
        finally:
            consumer.close()

    def close(self) -> None:
        self.producer.flush(5)


class KafkaPython:
    def __init__(self, bootstrap: str, topic: str, txn_id: str, timeout_ms: int) -> None:
        from kafka import KafkaProducer

        self.topic = topic
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id,
                                      transaction_timeout_ms=timeout_ms, acks="all", linger_ms=5,
                                      max_block_ms=CALL_TIMEOUT_S * 1000, request_timeout_ms=15000,
                                      reconnect_backoff_max_ms=1000)

    names = staticmethod(exception_names)

    def init(self) -> None:
        self.producer.init_transactions()

    def begin(self) -> None:
        self.producer.begin_transaction()

    def commit(self) -> None:
        self.producer.commit_transaction()

    def abort(self) -> None:
        self.producer.abort_transaction()

    def send(self, records: list[tuple[int, bytes]]) -> list[list[int]]:
        futures = [self.producer.send(self.topic, key=v, value=v, partition=p) for p, v in records]
        self.producer.flush(CALL_TIMEOUT_S)
        return [[md.partition, md.offset] for md in (f.get(CALL_TIMEOUT_S) for f in futures)]

    def offsets(self, group: str, offsets: dict[int, int]) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        self.producer.send_offsets_to_transaction(
            {TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}, group)

    def close(self) -> None:
        self.producer.close(5)


class AioKafka:
    """aiokafka is asyncio: every call runs to completion on the one loop, bounded by a timeout."""

    def __init__(self, bootstrap: str, topic: str, txn_id: str, timeout_ms: int) -> None:
        self.args = dict(bootstrap_servers=bootstrap, transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                         request_timeout_ms=15000)
        self.topic = topic
        self.loop = asyncio.new_event_loop()
        self.producer = None

    names = staticmethod(exception_names)

    def _run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, CALL_TIMEOUT_S))

    def init(self) -> None:
        from aiokafka import AIOKafkaProducer

        async def start():
            self.producer = AIOKafkaProducer(**self.args)
            await self.producer.start()  # InitProducerId with the transactional id

        self._run(start())

    def begin(self) -> None:
        self._run(self.producer.begin_transaction())

    def commit(self) -> None:
        self._run(self.producer.commit_transaction())

    def abort(self) -> None:
        self._run(self.producer.abort_transaction())

    def send(self, records: list[tuple[int, bytes]]) -> list[list[int]]:
        async def send_all():
            futures = [await self.producer.send(self.topic, key=v, value=v, partition=p) for p, v in records]
            return [[md.partition, md.offset] for md in await asyncio.gather(*futures)]

        return self._run(send_all())

    def offsets(self, group: str, offsets: dict[int, int]) -> None:
        from aiokafka import TopicPartition

        self._run(self.producer.send_offsets_to_transaction(
            {TopicPartition(self.topic, p): o for p, o in offsets.items()}, group))

    def close(self) -> None:
        if self.producer is not None:
            self._run(self.producer.stop())
        self.loop.close()


FAMILIES = {"confluent": Confluent, "kafka-python": KafkaPython, "aiokafka": AioKafka}


def main() -> None:
    family, bootstrap, topic, txn_id, timeout_ms = sys.argv[1:6]
    if family in ("kafka-python", "aiokafka"):
        import logging

        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    client = FAMILIES[family](bootstrap, topic, txn_id, int(timeout_ms))
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        op = words[0]
        if op == "close":
            break
        try:
            if op == "send":
                emit(op=op, ok=True, acks=client.send(parse_records(words[1])))
                continue
            if op == "offsets":
                client.offsets(words[1], parse_offsets(words[2]))
            elif op in ("init", "begin", "commit", "abort"):
                getattr(client, op)()
            else:
                raise ValueError(f"unknown command {op!r}")
            emit(op=op, ok=True)
        except Exception as exc:  # noqa: BLE001 - every failure is an answer
            emit(op=op, ok=False, error=f"{type(exc).__name__}: {exc}", names=client.names(exc))
    try:
        client.close()
    finally:
        emit(op="close", ok=True)


if __name__ == "__main__":
    main()
