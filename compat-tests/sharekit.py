"""Share-group (KIP-932) scenarios shared by every share-consumer family (test_share_groups_families.py).

A *share member* is a separate OS process running one stock share consumer (so a test can SIGKILL
it), started with a group, a topic, an acknowledgement mode and a policy, and printing JSON lines on
stdout that `ShareMember` collects (through groupkit.Member's reader):

    {"event": "ready"}                                  subscribed; polling from now on
    {"event": "record", "partition": 0, "offset": 5, "value": "v5", "delivery_count": 1, "t": 1795...}
    {"event": "ack-error", "topic": t, "partition": p, "error": "..."}    an acknowledgement refused
    {"event": "error", "error": "<class>", "message": "..."}             a failure (then exit 1)
    {"event": "closed"}                                 after a clean close on SIGTERM (exit 0)

Modes: `implicit` (every record polled is accepted by the next poll or the close) or `explicit`
with a policy: `accept` every record; `by-value`: a record whose value starts with "release" is
RELEASEd the first time the process sees it and ACCEPTed after, "again..." RELEASEd every time (up
to the delivery count limit), "reject..." REJECTed, any other ACCEPTed, with a commit
(ShareAcknowledge) after each poll; `hold`: poll until records come, then
keep them unacknowledged and poll no more (an explicit-mode consumer refuses to poll again with
records unacknowledged) until the process is killed.

The families (`FAMILIES`, a `ShareFamily` adapter each):

- `confluent`: confluent-kafka 2.16's `ShareConsumer` (librdkafka 2.16), this file run as a program
  (`python sharekit.py <bootstrap> <group> <topic> <mode> [policy] [K=V ...]`, the K=V pairs more
  consumer configs);
- `java43`: kafka-clients 4.3's `KafkaShareConsumer`, `ShareHarness share-consumer` (compat-tests/java,
  the conftest fixture `java_share_harness_43`).

What only one family has is in its adapter's capabilities (`spread_config`) or in a test marked
for that family in test_share_groups_families.py. The record lock duration is the broker's
(`group.share.record.lock.duration.ms`, the test module's KBROKER_OVERRIDES), not a client's.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

import groupkit as gk

HERE = Path(__file__).resolve().parent
MODES = ("implicit", "explicit")
POLICIES = ("accept", "by-value", "hold")


# --------------------------------------------------------------------------------------------
# the member processes


class ShareMember(gk.Member):
    """One share-consumer process of any family; `deliveries` are its record events in order."""

    @property
    def deliveries(self) -> list[dict]:
        return self._of("record")

    @property
    def ready(self) -> bool:
        return bool(self._of("ready"))

    @property
    def problems(self) -> list[dict]:
        return self._of("error") + self._of("ack-error")

    def describe(self) -> str:
        return (f"share member {self.name} (pid {self.proc.pid}, alive={self.alive}): "
                f"{len(self.deliveries)} deliveries, problems={self.problems}, unparsed={self.unparsed[-5:]}"
                f"\n--- stderr tail ---\n{self.stderr_tail()}")

    def check(self) -> None:
        """Fail on an error event, a refused acknowledgement or an exit nobody asked for."""
        if self.problems or (not self.alive and not self._stop_sent):
            raise AssertionError(f"{self.describe()}\nexit status {self.proc.poll()}")

    def close_cleanly(self) -> None:
        """SIGTERM: the member closes its consumer (sending what implicit acknowledgement owes, leaving
        the group), prints closed and exits 0, having reported no problem."""
        status = self.terminate(60)
        assert status == 0 and self.closed_cleanly and not self.problems, \
            f"exit status {status}, closed={self.closed_cleanly}\n{self.describe()}"


def wait_for(cond: Callable[[], object], timeout: float, what: str, members: Iterable[ShareMember]) -> object:
    """`cond` until true; fail at once when a member reports a problem or dies."""
    members = list(members)
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            m.check()
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            details = "\n".join(m.describe() for m in members)
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{details}")
        time.sleep(0.1)


def watch(members: Iterable[ShareMember], seconds: float) -> None:
    """Let the members run for `seconds`, failing at once on a problem."""
    members = list(members)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in members:
            m.check()
        time.sleep(0.1)


# --------------------------------------------------------------------------------------------
# the family adapters


class ShareFamily:
    """How to run one client family's share member. `spread_config`: consumer configs for the
    work-spread scenario (confluent: small polls, so the work is shared among the members);
    `spread_members` / `spread_min_busy`: how many members share two partitions there, and how
    many of them must get work at least."""

    name = ""
    spread_config: ClassVar[dict[str, str]] = {}
    spread_members = 3
    spread_min_busy = 2

    def require(self, kt, request) -> None:
        raise NotImplementedError

    def argv(self, request, bootstrap: str, group: str, topic: str, mode: str, policy: str,
             config: dict[str, str]) -> list[str]:
        raise NotImplementedError


class Confluent(ShareFamily):
    name = "confluent"
    spread_config: ClassVar[dict[str, str]] = {"max.poll.records": "5"}
    spread_members = 4
    spread_min_busy = 3

    def require(self, kt, request) -> None:
        ck = kt.require_module("confluent_kafka")
        kt.require(hasattr(ck, "ShareConsumer"), f"confluent-kafka {ck.version()[0]} has no ShareConsumer (2.15+)")

    def argv(self, request, bootstrap, group, topic, mode, policy, config):
        return [sys.executable, str(Path(__file__).resolve()), bootstrap, group, topic, mode, policy,
                *(f"{k}={v}" for k, v in config.items())]


class Java43(ShareFamily):
    name = "java43"
    fixture = "java_share_harness_43"

    def require(self, kt, request) -> None:
        request.getfixturevalue(self.fixture)  # compiles ShareHarness.java against kafka-clients 4.3

    def argv(self, request, bootstrap, group, topic, mode, policy, config):
        assert not config, f"ShareHarness takes no consumer configs: {config}"
        return request.getfixturevalue(self.fixture).argv("share-consumer", bootstrap, group, topic, mode, policy)


FAMILIES = (Confluent(), Java43())


class ShareCtx:
    """What a scenario needs: the family, the broker; the members started, killed at teardown."""

    def __init__(self, kt, request, tmp_path: Path, family: ShareFamily, broker) -> None:
        self.kt, self.request, self.tmp_path, self.family, self.broker = kt, request, tmp_path, family, broker
        self.started: list[ShareMember] = []

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def spawn(self, group: str, topic: str, mode: str = "implicit", policy: str = "accept",
              config: dict[str, str] | None = None) -> ShareMember:
        assert mode in MODES and policy in POLICIES, (mode, policy)
        argv = self.family.argv(self.request, self.bootstrap, group, topic, mode, policy, config or {})
        member = ShareMember(argv, f"{self.family.name}-{len(self.started)}-{policy}", self.tmp_path)
        self.started.append(member)
        return member

    def kill_all(self) -> None:
        for member in self.started:
            member.kill()


# --------------------------------------------------------------------------------------------
# topics, records and group configs (confluent-kafka, whichever family consumes)


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)
    return topic


def set_group_config(bootstrap: str, group: str, config: dict[str, str]) -> None:
    """IncrementalAlterConfigs (SET) of a GROUP resource, e.g. share.auto.offset.reset."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()]
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=entries)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, values: list[str], partitions: int = 1, chunk: int | None = None,
            headers: list | None = None, timestamp_ms: int | None = None) -> None:
    """values[i] to partition i % partitions; with `chunk`, flushed every `chunk` records (a batch
    each), a little apart: a share fetch acquires whole batches, so one member could otherwise take
    every record in a single fetch. `headers` for every record; `timestamp_ms` their CreateTime."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    extra = {"headers": headers} if headers else {}
    if timestamp_ms is not None:
        extra["timestamp"] = timestamp_ms
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions, **extra)
        if chunk and (i + 1) % chunk == 0:
            assert producer.flush(30) == 0
            time.sleep(0.05)
    assert producer.flush(30) == 0


# --------------------------------------------------------------------------------------------
# the confluent-kafka share member: python sharekit.py <bootstrap> <group> <topic> <mode> [policy] [K=V ...]


def _emit(event: dict) -> None:
    os.write(sys.stdout.fileno(), (json.dumps(event) + "\n").encode())


def confluent_member(bootstrap: str, group: str, topic: str, mode: str, policy: str, config: dict[str, str]) -> int:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    assert mode in MODES and policy in POLICIES, (mode, policy)
    explicit = mode == "explicit"
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "fetch.wait.max.ms": 100,
                              "share.acknowledgement.mode": mode, **config})
    consumer.subscribe([topic])
    _emit({"event": "ready"})
    seen: set[tuple[int, int]] = set()
    holding = False
    while not stop:
        if holding:  # hold: keep the records, poll no more
            time.sleep(0.05)
            continue
        messages = consumer.poll(0.1) or []
        for m in messages:
            if m.error() is not None:
                _emit({"event": "error", "error": "KafkaError", "message": str(m.error())})
                continue
            value = (m.value() or b"").decode(errors="replace")
            _emit({"event": "record", "partition": m.partition(), "offset": m.offset(), "value": value,
                   "delivery_count": m.delivery_count(), "t": time.time()})
            first = (m.partition(), m.offset()) not in seen
            seen.add((m.partition(), m.offset()))
            if not explicit or policy == "hold":
                continue
            kind = AcknowledgeType.ACCEPT
            if policy == "by-value" and value.startswith("reject"):
                kind = AcknowledgeType.REJECT
            elif policy == "by-value" and (value.startswith("again") or value.startswith("release") and first):
                kind = AcknowledgeType.RELEASE
            consumer.acknowledge(m, kind)
        if not messages or not explicit:
            continue
        if policy == "hold":
            holding = True
            continue
        for tp, exc in consumer.commit_sync(30).items():
            if exc is not None:
                _emit({"event": "ack-error", "topic": tp.topic, "partition": tp.partition, "error": str(exc)})
    consumer.close()  # sends what implicit acknowledgement still owes, leaves the group
    _emit({"event": "closed"})
    return 0


if __name__ == "__main__":
    _bootstrap, _group, _topic, _mode = sys.argv[1:5]
    _policy = sys.argv[5] if len(sys.argv) > 5 else "accept"
    _config = dict(kv.split("=", 1) for kv in sys.argv[6:])
    try:
        sys.exit(confluent_member(_bootstrap, _group, _topic, _mode, _policy, _config))
    except Exception as e:  # reported as the harnesses do, then exit 1
        _emit({"event": "error", "error": type(e).__name__, "message": str(e)})
        raise
