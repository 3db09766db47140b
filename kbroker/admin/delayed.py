"""`kbroker delayed`: the pending delayed deliveries, over the Kafka protocol.

    kbroker delayed list [--topic T] [--limit N]
    kbroker delayed cancel ID [ID ...]
    kbroker delayed cancel --topic T [--partition P] --all

`list` reads `__delayed_messages` from each partition's leader (Fetch; clients may read internal
topics, as with `__consumer_offsets`) and replays it: a schedule record is pending until a
tombstone with its key follows. Records in the partition's last intent without tombstones are
being delivered now. `cancel` writes tombstones for the chosen ids to their partition's leader
(Produce with the client id `__admin_client`, the only writer of internal topics Kafka allows);
the leader refuses to cancel a record whose delivery has started. Ids are `PARTITION:HEX`, as
`list` prints them. --bootstrap-server, --timeout and --output table|json as the other commands.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kbroker.admin.client import DEFAULT_TIMEOUT_S, AdminClient, AdminError, KafkaErrorResponse
from kbroker.admin.connection import FETCH, PRODUCE
from kbroker.admin.groups import format_table
from kbroker.admin.security import add_command_config_argument, security_of
from kbroker.delayed.format import (
    ADMIN_CLIENT_ID,
    DELAYED_TOPIC,
    KIND_INTENT,
    KIND_SCHEDULE,
    DelayedRecord,
    decode_intent,
    decode_key,
    decode_schedule,
    format_id,
    parse_id,
    schedule_key,
)
from kbroker.wire.internal_records import build_internal_batch, iter_internal_records
from kbroker.wire.primitives import DecodeError
from kbroker.wire.records import iter_batch_headers

FETCH_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class PendingDelivery:
    partition: int  # of __delayed_messages
    offset: int
    record: DelayedRecord
    delivering: bool

    @property
    def id(self) -> str:
        return format_id(self.partition, self.record.id)


def add_delayed_command(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]")
    add_command_config_argument(common)
    common.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS")
    common.add_argument("--output", choices=("table", "json"), default="table")
    delayed = sub.add_parser("delayed", help="list and cancel pending delayed deliveries")
    dsub = delayed.add_subparsers(dest="delayed_command", required=True)
    lst = dsub.add_parser("list", parents=[common], help="pending deliveries, earliest first")
    lst.add_argument("--topic", help="only those for this topic")
    lst.add_argument("--limit", type=int, default=0, help="print at most this many (0: all)")
    cancel = dsub.add_parser("cancel", parents=[common], help="cancel pending deliveries")
    cancel.add_argument("ids", nargs="*", metavar="ID", help="ids as `list` prints them (PARTITION:HEX)")
    cancel.add_argument("--topic", help="with --all: every pending delivery to this topic")
    cancel.add_argument("--partition", type=int, help="with --topic: only to this partition")
    cancel.add_argument("--all", action="store_true")


def run_delayed(args: argparse.Namespace) -> int:
    try:
        with AdminClient(args.bootstrap_server, args.timeout, security_of(args)) as client:
            if args.delayed_command == "list":
                return _list(client, args)
            return _cancel(client, args)
    except (AdminError, ValueError) as exc:
        print(f"kbroker delayed: {exc}", file=sys.stderr)
        return 1


# -- reading the delay log -------------------------------------------------------------------------

def replay(partition: int, records) -> list[PendingDelivery]:
    """The pending deliveries of one partition from its (offset, key, value) records, oldest first."""
    pending: dict[bytes, tuple[int, DelayedRecord]] = {}
    open_intents: dict[tuple[str, int], set[bytes]] = {}
    for offset, key, value in records:
        try:
            decoded = decode_key(key)
            if decoded.kind == KIND_SCHEDULE and decoded.record_id is not None:
                if value is None:
                    pending.pop(decoded.record_id, None)
                else:
                    pending[decoded.record_id] = (offset, decode_schedule(decoded.record_id, value))
            elif decoded.kind == KIND_INTENT and decoded.target is not None and value is not None:
                open_intents[decoded.target] = {i for i, _o in decode_intent(decoded.target, value).items}
        except DecodeError:
            continue
    delivering = set().union(*open_intents.values()) if open_intents else set()
    return [PendingDelivery(partition, offset, rec, rec.id in delivering) for offset, rec in pending.values()]


def _read_partition(client: AdminClient, leader, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
    conn = client.connection(leader.host, leader.port)
    offset, out = 0, []
    while True:
        body = conn.call(FETCH, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": FETCH_BYTES, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": DELAYED_TOPIC, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": FETCH_BYTES}]}]})
        data = body.responses[0].partitions[0]
        if data.error_code == ErrorCode.offset_out_of_range and offset == 0:
            offset = int(data.log_start_offset)
            continue
        if data.error_code != ErrorCode.none:
            raise KafkaErrorResponse(data.error_code, f"Fetch of {DELAYED_TOPIC}-{partition}")
        chunk = bytes(data.records or b"")
        next_offset = offset
        for _pos, header in iter_batch_headers(chunk):
            next_offset = header.next_offset
        out.extend(r for r in iter_internal_records(chunk) if r[0] >= offset)
        if next_offset <= offset or next_offset >= data.high_watermark:
            return out
        offset = next_offset


def _leaders(client: AdminClient) -> dict[int, Any]:
    brokers, topics = client.metadata([DELAYED_TOPIC])
    entry = topics.get(DELAYED_TOPIC)
    if entry is None or entry.error_code == ErrorCode.unknown_topic_or_partition:
        return {}
    if entry.error_code != ErrorCode.none:
        raise KafkaErrorResponse(entry.error_code, f"metadata of {DELAYED_TOPIC}")
    out = {}
    for p in entry.partitions:
        leader = brokers.get(p.leader_id)
        if leader is None:
            raise AdminError(f"{DELAYED_TOPIC}-{p.partition_index} has no leader now")
        out[int(p.partition_index)] = leader
    return out


def list_pending(client: AdminClient, topic: str | None = None) -> list[PendingDelivery]:
    found: list[PendingDelivery] = []
    for partition, leader in sorted(_leaders(client).items()):
        found.extend(p for p in replay(partition, _read_partition(client, leader, partition))
                     if topic is None or p.record.target[0] == topic)
    return sorted(found, key=lambda p: (p.record.due_ms, p.partition, p.offset))


def cancel_pending(client: AdminClient, ids: list[tuple[int, bytes]]) -> None:
    leaders = _leaders(client)
    by_partition: dict[int, list[bytes]] = {}
    for partition, record_id in ids:
        by_partition.setdefault(partition, []).append(record_id)
    for partition, record_ids in sorted(by_partition.items()):
        leader = leaders.get(partition)
        if leader is None:
            raise AdminError(f"{DELAYED_TOPIC} has no partition {partition}")
        batch = build_internal_batch([(schedule_key(i), None) for i in record_ids], int(time.time() * 1000))
        body = client.connection(leader.host, leader.port).call(PRODUCE, {
            "transactional_id": None, "acks": -1, "timeout": int(client.timeout * 1000),
            "topic_data": [{"name": DELAYED_TOPIC, "partition_data": [{"index": partition, "records": batch}]}]},
            client_id=ADMIN_CLIENT_ID)
        answer = body.responses[0].partition_responses[0]
        if answer.error_code != ErrorCode.none:
            raise KafkaErrorResponse(answer.error_code, f"cancel in {DELAYED_TOPIC}-{partition}",
                                     getattr(answer, "error_message", None))


# -- commands --------------------------------------------------------------------------------------

def _row(p: PendingDelivery) -> dict:
    r = p.record
    return {"ID": p.id, "TOPIC": r.target[0], "PARTITION": r.target[1], "DUE": r.due_ms,
            "DUE_UTC": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(r.due_ms / 1000)) + f".{r.due_ms % 1000:03d}Z",
            "CREATE_TIME": r.timestamp, "KEY": _preview(r.key), "VALUE_BYTES": len(r.value or b""),
            "STATE": "delivering" if p.delivering else "pending"}


def _preview(key: bytes | None) -> str:
    if key is None:
        return "-"
    text = key.decode("utf-8", "replace")
    return text if len(text) <= 24 else text[:21] + "..."


def _list(client: AdminClient, args: argparse.Namespace) -> int:
    rows = [_row(p) for p in list_pending(client, args.topic)]
    if args.limit > 0:
        rows = rows[:args.limit]
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    else:
        headers = ["ID", "TOPIC", "PARTITION", "DUE_UTC", "KEY", "VALUE_BYTES", "STATE"]
        print(format_table(headers, [[r[h] for h in headers] for r in rows]))
    return 0


def _cancel(client: AdminClient, args: argparse.Namespace) -> int:
    if args.all == bool(args.ids) or (args.all and not args.topic):
        raise AdminError("cancel takes ids, or --topic T [--partition P] --all")
    pending = list_pending(client, args.topic if args.all else None)
    if args.all:
        chosen = [p for p in pending if args.partition is None or p.record.target[1] == args.partition]
    else:
        wanted = [parse_id(text) for text in args.ids]
        known = {(p.partition, p.record.id): p for p in pending}
        missing = [format_id(*w) for w in wanted if w not in known]
        if missing:
            raise AdminError(f"no pending delivery with id {', '.join(missing)}")
        chosen = [known[w] for w in wanted]
    cancel_pending(client, [(p.partition, p.record.id) for p in chosen])
    if args.output == "json":
        print(json.dumps({"cancelled": [p.id for p in chosen]}))
    else:
        print(f"cancelled {len(chosen)} pending deliveries")
    return 0
