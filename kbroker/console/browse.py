"""The message browser's pure core: what a browse query asks for (parsed from the form, bounded),
where each partition's read starts, which records a filter keeps, and how a key, value or header is
shown (JSON pretty-printed, text, or a hex dump; with a schema registry, a key or value in
Confluent's wire format decoded by the `decode` function the backend is handed). No I/O: the
backend reads, this decides.

Message contents are untrusted: nothing here produces markup; the templates escape everything.
"""

from __future__ import annotations

import datetime
import json
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

from kbroker.console.schemas import Decoded
from kbroker.wire.records import Record

MODES = ("earliest", "offset", "timestamp", "latest")
FORMATS = ("auto", "json", "text", "hex")
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_FILTER_CHARS = 200
MAX_SCANNED_PER_PARTITION = 5000  # records a filtered read looks at before it stops
MAX_SHOWN_BYTES = 64 * 1024  # of one key, value or header; the rest is cut with a note
HEX_WIDTH = 16

TopicPartition = tuple[str, int]
# (key or value, is_key) -> None: not in Confluent's wire format; Decoded; or why it did not decode
Decode = Callable[[bytes, bool], "Decoded | str | None"]


class QueryError(ValueError):
    """A browse query that cannot be run (told to the user as it is)."""


class BrowseQuery(NamedTuple):
    topic: str
    partition: int | None  # None: every partition
    mode: str  # one of MODES
    offset: int  # mode "offset"
    timestamp_ms: int  # mode "timestamp"
    limit: int
    filter: str  # case-insensitive substring of key, value, header name or value; "" keeps all
    format: str  # one of FORMATS


class Shown(NamedTuple):
    """A key, value or header value as displayed."""

    kind: str  # "json", "text", "hex" or "null"
    text: str
    size: int  # bytes in the record
    truncated: bool
    label: str = ""  # decoded with a registry's schema: "Avro · schema id 3 · subject orders-value v2"
    note: str = ""  # in Confluent's wire format but not decoded: why (one line)


class MessageView(NamedTuple):
    partition: int
    offset: int
    timestamp_ms: int
    timestamp: str  # ISO 8601, UTC
    key: Shown
    value: Shown
    headers: tuple[tuple[str, Shown], ...]


def _int(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = (params.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise QueryError(f"{name} must be a whole number, not {raw[:40]!r}") from None
    if not low <= value <= high:
        raise QueryError(f"{name} must be between {low} and {high}")
    return value


def parse_timestamp(raw: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 date-time (UTC unless it names a zone)."""
    raw = raw.strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        when = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise QueryError(f"timestamp {raw[:40]!r} is neither milliseconds nor ISO 8601 "
                         f"(e.g. 2024-05-01T12:00:00Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp() * 1000)


def parse_query(topic: str, params: Mapping[str, str]) -> BrowseQuery:
    """A browse query from the form's fields; every value bounded."""
    mode = params.get("mode") or "latest"
    if mode not in MODES:
        raise QueryError(f"mode must be one of {', '.join(MODES)}")
    fmt = params.get("format") or "auto"
    if fmt not in FORMATS:
        raise QueryError(f"format must be one of {', '.join(FORMATS)}")
    partition_raw = (params.get("partition") or "").strip()
    partition = None if partition_raw in ("", "all") else _int(params, "partition", 0, 0, 2**31 - 1)
    offset = _int(params, "offset", 0, 0, 2**63 - 1) if mode == "offset" else 0
    timestamp_ms = 0
    if mode == "timestamp":
        if not (params.get("timestamp") or "").strip():
            raise QueryError("mode timestamp needs a timestamp")
        timestamp_ms = parse_timestamp(params["timestamp"])
    text = params.get("filter") or ""
    if len(text) > MAX_FILTER_CHARS:
        raise QueryError(f"the filter is longer than {MAX_FILTER_CHARS} characters")
    return BrowseQuery(topic, partition, mode, offset, timestamp_ms,
                       _int(params, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT), text, fmt)


def start_offsets(query: BrowseQuery, log_start: Mapping[TopicPartition, int | None],
                  log_end: Mapping[TopicPartition, int | None],
                  by_time: Mapping[TopicPartition, int | None] | None = None) -> dict[TopicPartition, tuple[int, int]]:
    """(first offset to read, log end) per partition whose offsets are known. "latest" reads the
    last `limit` offsets; an offset outside the log is clamped into it; a timestamp later than every
    record starts at the log end (nothing to show)."""
    out = {}
    for tp, end in log_end.items():
        start = log_start.get(tp)
        if start is None or end is None:
            continue
        if query.mode == "earliest":
            first = start
        elif query.mode == "latest":
            first = max(start, end - query.limit)
        elif query.mode == "offset":
            first = min(max(query.offset, start), end)
        else:
            found = (by_time or {}).get(tp)
            first = end if found is None else min(max(found, start), end)
        out[tp] = (first, end)
    return out


def _utf8(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", "replace")


def matches(record: Record, needle: str) -> bool:
    """Whether `needle` occurs (case-insensitive) in the key, the value, or a header's name or value."""
    if not needle:
        return True
    needle = needle.casefold()
    fields = [record.key, record.value, *(v for _k, v in record.headers)]
    return (any(needle in _utf8(f).casefold() for f in fields)
            or any(needle in k.casefold() for k, _v in record.headers))


def _printable(text: str) -> bool:
    return all(c.isprintable() or c in "\t\n\r" for c in text)


def hex_dump(data: bytes) -> str:
    """Offset, 16 bytes in hex, and the same bytes as ASCII (others as '.'), a line per 16 bytes."""
    lines = []
    for pos in range(0, len(data), HEX_WIDTH):
        chunk = data[pos:pos + HEX_WIDTH]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{pos:08x}  {hexes:<{HEX_WIDTH * 3 - 1}}  |{text}|")
    return "\n".join(lines)


def _utf8_text(part: bytes, truncated: bool) -> str | None:
    """`part` as UTF-8, None if it is not; a cut part may end inside a character (up to 3 bytes)."""
    for cut in range(4 if truncated else 1):
        try:
            return part[:len(part) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def show(data: bytes | None, fmt: str = "auto", dump: bool = True) -> Shown:
    """How a key, value or header value is displayed. "auto": JSON (pretty-printed) when it is a
    JSON object or array, text when it is printable UTF-8, hex otherwise. A format that does not fit
    the bytes (JSON asked of non-JSON) falls back to what "auto" gives. Without `dump` hex is one
    line of byte pairs (header values)."""
    if data is None:
        return Shown("null", "null", 0, False)
    size = len(data)
    truncated = size > MAX_SHOWN_BYTES
    part = data[:MAX_SHOWN_BYTES]
    def as_hex() -> Shown:
        return Shown("hex", hex_dump(part) if dump else part.hex(" "), size, truncated)

    if fmt == "hex":
        return as_hex()
    text = _utf8_text(part, truncated)
    looks_json = text is not None and text.lstrip()[:1] in ("{", "[")
    if text is not None and not truncated and (fmt == "json" or (fmt == "auto" and looks_json)):
        try:
            return Shown("json", json.dumps(json.loads(text), indent=2, ensure_ascii=False), size, False)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json allows
            pass
    if text is not None and _printable(text):
        return Shown("text", text, size, truncated)
    return as_hex()


def show_decoded(data: bytes | None, fmt: str, decode: Decode | None, is_key: bool) -> Shown:
    """A key or value: decoded with its schema when it is in Confluent's wire format and the
    format is "auto" or "json" ("text" and "hex" show the bytes as they are); shown by `show`
    otherwise, with the reason when it was in the wire format but did not decode."""
    if decode is None or data is None or fmt not in ("auto", "json"):
        return show(data, fmt)
    outcome = decode(data, is_key)
    if outcome is None:
        return show(data, fmt)
    if isinstance(outcome, str):
        return show(data, fmt)._replace(note=outcome)
    return Shown("json", outcome.text, len(data), outcome.truncated, outcome.label)


def iso_time(ms: int) -> str:
    if ms < 0:
        return "-"
    try:
        when = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def view(partition: int, record: Record, fmt: str, decode: Decode | None = None) -> MessageView:
    return MessageView(partition, record.offset, record.timestamp, iso_time(record.timestamp),
                       show_decoded(record.key, "auto" if fmt == "json" else fmt, decode, True),
                       show_decoded(record.value, fmt, decode, False),
                       tuple((k, show(v, "hex" if fmt == "hex" else "text", dump=False)) for k, v in record.headers))


def select(query: BrowseQuery, read: Mapping[int, Sequence[Record]], decode: Decode | None = None
           ) -> list[MessageView]:
    """The messages to show from the records read per partition: those the filter keeps (it looks
    at the bytes, not at what they decode to), oldest first by timestamp ("latest": newest
    first), at most `limit`; keys and values in Confluent's wire format decoded by `decode`."""
    kept: list[tuple[int, Record]] = [(p, r) for p, records in read.items() for r in records
                                      if matches(r, query.filter)]
    newest_first = query.mode == "latest"
    kept.sort(key=lambda pr: (pr[1].timestamp, pr[0], pr[1].offset), reverse=newest_first)
    return [view(p, r, query.format, decode) for p, r in kept[:query.limit]]


def partitions_to_read(query: BrowseQuery, partitions: Iterable[int]) -> list[int]:
    known = sorted(partitions)
    if query.partition is None:
        return known
    if query.partition not in known:
        raise QueryError(f"topic {query.topic!r} has no partition {query.partition}")
    return [query.partition]
