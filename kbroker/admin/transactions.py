"""`kbroker transactions`: the jobs of Kafka's kafka-transactions.sh, over the Kafka protocol.

    kbroker transactions list
    kbroker transactions describe --transactional-id ID
    kbroker transactions describe-producers --topic T --partition P
    kbroker transactions abort --topic T --partition P (--start-offset O |
                               --producer-id ID --producer-epoch E --coordinator-epoch C)
    kbroker transactions find-hanging [--broker-id N] [--max-transaction-timeout MINUTES]

`abort` writes an ABORT marker to one partition, as kafka-transactions.sh does: the way out of a
hanging transaction, one whose producer and coordinator both forgot it while its records hold
the partition's last stable offset back. `--start-offset` finds the producer with DescribeProducers.
Every command takes --bootstrap-server, --timeout and --output table|json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from kio.schema.errors import ErrorCode

from kbroker.admin.client import DEFAULT_TIMEOUT_S, AdminClient, AdminError, Broker, KafkaErrorResponse
from kbroker.admin.connection import (DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, FIND_COORDINATOR,
                                      LIST_TRANSACTIONS, WRITE_TXN_MARKERS)
from kbroker.admin.groups import format_table
from kbroker.admin.security import add_command_config_argument, security_of

TRANSACTION_KEY = 1  # FindCoordinator's key type for transactional ids
_RETRIABLE = (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available, ErrorCode.not_coordinator)


def add_transactions_command(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]")
    add_command_config_argument(common)
    common.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS")
    common.add_argument("--output", choices=("table", "json"), default="table")
    txn = sub.add_parser("transactions", help="list, describe and abort transactions "
                                              "(what kafka-transactions.sh does)")
    tsub = txn.add_subparsers(dest="transactions_command", required=True)
    tsub.add_parser("list", parents=[common], help="every transactional id, its coordinator and state")
    desc = tsub.add_parser("describe", parents=[common], help="one transactional id's state and partitions")
    desc.add_argument("--transactional-id", required=True)
    prod = tsub.add_parser("describe-producers", parents=[common], help="the producers of one partition")
    prod.add_argument("--topic", required=True)
    prod.add_argument("--partition", type=int, required=True)
    abort = tsub.add_parser("abort", parents=[common], help="abort an open (hanging) transaction on one partition")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="the first offset of the transaction to abort")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    hanging = tsub.add_parser("find-hanging", parents=[common],
                              help="open transactions their coordinator does not know (or no longer has open)")
    hanging.add_argument("--broker-id", type=int, help="only partitions this broker leads")
    hanging.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                         help="transactions open for less than this are not suspects (default 15, "
                              "transaction.max.timeout.ms)")


def run_transactions(args: argparse.Namespace) -> int:
    command = {"list": _list, "describe": _describe, "describe-producers": _describe_producers, "abort": _abort,
               "find-hanging": _find_hanging}[args.transactions_command]
    try:
        with AdminClient(args.bootstrap_server, args.timeout, security_of(args)) as client:
            return command(client, args)
    except AdminError as exc:
        print(f"kbroker transactions: {exc}", file=sys.stderr)
        return 1


def _emit(args: argparse.Namespace, rows: list[dict], headers: list[str]) -> None:
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    else:
        print(format_table(headers, [[r[h] for h in headers] for r in rows]))


# -- the calls -----------------------------------------------------------------------------------------

def list_transactions(client: AdminClient) -> list[dict]:
    """Every broker lists the ids it coordinates."""
    brokers, _ = client.metadata([])
    rows = []
    for broker in sorted(brokers.values()):
        body = client.connection(broker.host, broker.port).call(
            LIST_TRANSACTIONS, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1})
        if body.error_code != ErrorCode.none:
            raise KafkaErrorResponse(body.error_code, f"ListTransactions from broker {broker.node_id}")
        rows += [{"TransactionalId": t.transactional_id, "Coordinator": broker.node_id,
                  "ProducerId": int(t.producer_id), "TransactionState": t.transaction_state}
                 for t in body.transaction_states]
    return sorted(rows, key=lambda r: r["TransactionalId"])


def _coordinator_of(client: AdminClient, transactional_id: str) -> Broker:
    body = client._any().call(FIND_COORDINATOR, {"key": transactional_id, "key_type": TRANSACTION_KEY,
                                                  "coordinator_keys": [transactional_id]})
    answer = body.coordinators[0] if hasattr(body, "coordinators") and body.coordinators else body
    if answer.error_code != ErrorCode.none:
        raise KafkaErrorResponse(answer.error_code, f"FindCoordinator for transactional id {transactional_id!r}")
    return Broker(int(answer.node_id), answer.host, int(answer.port))


def describe_transaction(client: AdminClient, transactional_id: str) -> dict:
    deadline = time.monotonic() + client.timeout
    while True:
        coordinator = _coordinator_of(client, transactional_id)
        body = client.connection(coordinator.host, coordinator.port).call(
            DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]})
        state = body.transaction_states[0]
        code = ErrorCode(state.error_code)
        if code == ErrorCode.none:
            break
        if code not in _RETRIABLE or time.monotonic() > deadline:
            raise KafkaErrorResponse(code, f"DescribeTransactions for {transactional_id!r}")
        time.sleep(0.2)
    start = int(state.transaction_start_time_ms)
    return {
        "CoordinatorId": coordinator.node_id, "TransactionalId": transactional_id,
        "ProducerId": int(state.producer_id), "ProducerEpoch": int(state.producer_epoch),
        "TransactionState": state.transaction_state, "TransactionTimeoutMs": int(state.transaction_timeout_ms),
        "CurrentTransactionStartTimeMs": start if start >= 0 else None,
        "TransactionDurationMs": int(time.time() * 1000) - start if start >= 0 and state.topics else None,
        "TopicPartitions": ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions),
    }


def describe_producers(client: AdminClient, topic: str, partition: int) -> list[dict]:
    leader = _leader_of(client, topic, partition)
    body = client.connection(leader.host, leader.port).call(
        DESCRIBE_PRODUCERS, {"topics": [{"name": topic, "partition_indexes": [partition]}]})
    answer = body.topics[0].partitions[0]
    if answer.error_code != ErrorCode.none:
        raise KafkaErrorResponse(answer.error_code, f"DescribeProducers for {topic}-{partition}")
    return [{"ProducerId": int(p.producer_id), "ProducerEpoch": int(p.producer_epoch),
             "LatestCoordinatorEpoch": int(p.coordinator_epoch), "LastSequence": int(p.last_sequence),
             "LastTimestamp": int(p.last_timestamp), "CurrentTransactionStartOffset": int(p.current_txn_start_offset)}
            for p in answer.active_producers]


def _leader_of(client: AdminClient, topic: str, partition: int) -> Broker:
    leaders = client._by_leader([(topic, partition)], strict=True)
    return next(iter(leaders))  # strict: never None


def abort_transaction(client: AdminClient, topic: str, partition: int, producer_id: int, producer_epoch: int,
                      coordinator_epoch: int) -> None:
    """Write an ABORT marker for the producer's open transaction on the partition (Kafka's
    Admin.abortTransaction: WriteTxnMarkers straight to the partition's leader)."""
    leader = _leader_of(client, topic, partition)
    body = client.connection(leader.host, leader.port).call(WRITE_TXN_MARKERS, {"markers": [{
        "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": False,
        "coordinator_epoch": max(coordinator_epoch, 0),
        "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
    code = ErrorCode(body.markers[0].topics[0].partitions[0].error_code)
    if code != ErrorCode.none:
        raise KafkaErrorResponse(code, f"WriteTxnMarkers (abort) to {topic}-{partition}")


# -- commands --------------------------------------------------------------------------------------------

def _list(client: AdminClient, args: argparse.Namespace) -> int:
    _emit(args, list_transactions(client), ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"])
    return 0


def _describe(client: AdminClient, args: argparse.Namespace) -> int:
    row = describe_transaction(client, args.transactional_id)
    _emit(args, [row], list(row))
    return 0


def _describe_producers(client: AdminClient, args: argparse.Namespace) -> int:
    _emit(args, describe_producers(client, args.topic, args.partition),
          ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
           "CurrentTransactionStartOffset"])
    return 0


def _abort(client: AdminClient, args: argparse.Namespace) -> int:
    if args.start_offset is not None:
        found = [p for p in describe_producers(client, args.topic, args.partition)
                 if p["CurrentTransactionStartOffset"] == args.start_offset]
        if not found:
            raise AdminError(f"no open transaction starts at offset {args.start_offset} of {args.topic}-{args.partition}")
        p = found[0]
        producer_id, epoch, coordinator_epoch = p["ProducerId"], p["ProducerEpoch"], p["LatestCoordinatorEpoch"]
    elif None in (args.producer_id, args.producer_epoch, args.coordinator_epoch):
        raise AdminError("give --start-offset, or all of --producer-id, --producer-epoch and --coordinator-epoch")
    else:
        producer_id, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    abort_transaction(client, args.topic, args.partition, producer_id, epoch, coordinator_epoch)
    print(f"aborted the transaction of producer {producer_id} (epoch {epoch}) on {args.topic}-{args.partition}")
    return 0


def find_hanging(client: AdminClient, broker_id: int | None, max_timeout_ms: int) -> list[dict]:
    """Open transactions older than the largest allowed timeout whose coordinator does not have
    them open on that partition: the coordinator will never end them, an operator must."""
    _brokers, topics = client.metadata(None)
    now = int(time.time() * 1000)
    suspects = []
    for name, entry in sorted(topics.items()):
        for p in entry.partitions:
            if broker_id is not None and p.leader_id != broker_id:
                continue
            for producer in describe_producers(client, name, int(p.partition_index)):
                start = producer["CurrentTransactionStartOffset"]
                if start >= 0 and now - producer["LastTimestamp"] > max_timeout_ms:
                    suspects.append({"Topic": name, "Partition": int(p.partition_index), **producer})
    if not suspects:
        return []
    open_by_producer: dict[int, set[tuple[str, int]]] = {}
    for txn in list_transactions(client):
        if txn["TransactionState"] in ("Ongoing", "PrepareCommit", "PrepareAbort"):
            described = describe_transaction(client, txn["TransactionalId"])
            parts = {tuple(tp.rsplit("-", 1)) for tp in described["TopicPartitions"].split(",") if tp}
            open_by_producer[described["ProducerId"]] = {(t, int(q)) for t, q in parts}
    return [s for s in suspects if (s["Topic"], s["Partition"]) not in open_by_producer.get(s["ProducerId"], set())]


def _find_hanging(client: AdminClient, args: argparse.Namespace) -> int:
    rows = find_hanging(client, args.broker_id, args.max_transaction_timeout * 60_000)
    _emit(args, rows, ["Topic", "Partition", "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
                       "CurrentTransactionStartOffset", "LastTimestamp"])
    return 0
