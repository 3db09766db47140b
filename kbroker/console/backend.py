"""What each console page shows, asked of the brokers over the Kafka protocol (blocking: the web
layer runs these in worker threads). Requests are routed by `kbroker.admin.client.AdminClient`
(controller, coordinators, leaders) on clients kept in a small pool, one per call at a time since a
connection is not thread-safe. Sizes come from DescribeLogDirs at every broker, each with a short
timeout, so a slow broker leaves its sizes unknown instead of stalling a page.

A backend acts as one principal: the command config's, or (`--login`) one session's, whose
backend has a pool of its own closed when the session ends. What the principal may do is asked
in `access.py`; reads the brokers refuse raise their KafkaErrorResponse, which the web layer
shows as a refusal (refusals.py), except a topic's configs, refused on their own.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, NamedTuple

from kbroker.admin.client import (EARLIEST, LATEST, AdminClient, AdminError, Broker, ClusterDescription, ConfigValue,
                                  CreatedTopic, KafkaErrorResponse, TopicState)
from kbroker.admin.consumer_groups import ConsumerGroupDescription, describe_consumer_group
from kbroker.admin.groups import MemberView, OffsetRow, describe_group_offsets, offset_rows, plan_group_reset
from kbroker.admin.log_dirs import partition_sizes
from kbroker.admin.partition_reader import fetch_records
from kbroker.admin.reset import PlannedOffset, ResetSpec
from kbroker.admin.share_groups import plan_share_group_reset, share_group_not_found
from kbroker.console import access, browse
from kbroker.console.pages import (CLASSIC, CONSUMER, SHARE, BrokerRow, ConsumerGroupInfo, GroupRow, PartitionRow,
                                   ShareGroupDetail, TopicRow, broker_rows, consumer_group_info, consumer_group_row,
                                   group_row, member_view, partition_rows, share_group_detail, share_group_row,
                                   topic_rows)
from kbroker.console.refusals import (AUTHORIZATION_ERRORS, Action, describe_group, describe_topic, may_create_topics,
                                     may_reset_offsets, refusal_of)
from kbroker.console.samples import MAX_SERIES, SampleRound, lag_of, log_end_sum
from kbroker.security.acl import AclOperation, ResourceType

POOL_SIZE = 4
MAX_DESCRIBED_GROUPS = 100  # the groups list describes (members, lag) this many at each refresh
BROWSE_FETCH_BYTES = 8 * 1024 * 1024  # a browse reads this much per round of Fetches, shared by its partitions
MIN_FETCH_BYTES = 64 * 1024


class SamplingStopped(Exception):
    """A sampling round given up because the console is stopping."""


class ClientPool:
    """Idle admin clients for the worker threads; a client whose connection failed is closed, not
    reused (a broker's error answer leaves it usable). Once the pool is closed, clients still in
    use are closed when they come back."""

    def __init__(self, bootstrap: str, timeout: float, size: int = POOL_SIZE, security: Any = None) -> None:
        AdminClient(bootstrap, timeout).close()  # the bootstrap list is checked now, not at the first page
        self.bootstrap, self.timeout, self.size, self.security = bootstrap, timeout, size, security
        self._idle: list[AdminClient] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def client(self) -> Iterator[AdminClient]:
        with self._lock:
            client = self._idle.pop() if self._idle else None
        client = client or AdminClient(self.bootstrap, self.timeout, self.security)
        healthy = False
        try:
            yield client
            healthy = True
        except KafkaErrorResponse:
            healthy = True
            raise
        finally:
            with self._lock:
                keep = healthy and not self._closed and len(self._idle) < self.size
                if keep:
                    self._idle.append(client)
            if not keep:
                client.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for client in idle:
            client.close()


class Overview(NamedTuple):
    cluster: ClusterDescription
    brokers: list[BrokerRow]
    topics: int
    partitions: int
    under_replicated: int
    offline: int


class TopicDetail(NamedTuple):
    topic: TopicState
    partitions: list[PartitionRow]
    configs: list[ConfigValue]
    brokers: dict[int, Broker]
    configs_refused: str | None = None  # DescribeConfigs refused: why, in words


class BrowseResult(NamedTuple):
    query: browse.BrowseQuery
    partitions: list[int]  # of the topic
    messages: list[browse.MessageView]
    scanned: int  # records read (the filter looks at these)
    ranges: dict[int, tuple[int, int]]  # partition -> (first offset read, log end)
    next_offset: int | None  # one partition browsed: where the next page starts


class GroupDetail(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: Broker
    members: list[MemberView]
    offsets: list[OffsetRow]
    total_lag: int | None
    group_type: str = CLASSIC
    consumer: ConsumerGroupInfo | None = None  # a consumer-protocol group's ConsumerGroupDescribe


def _member_views(desc: ConsumerGroupDescription) -> list[MemberView]:
    return [member_view(m) for m in desc.members]


class ConsoleBackend:
    def __init__(self, bootstrap: str, timeout: float, security: Any = None, pool_size: int = POOL_SIZE) -> None:
        self.bootstrap = bootstrap
        self.pool = ClientPool(bootstrap, timeout, pool_size, security)
        username = getattr(security, "username", None)
        # SASL's principal as Kafka's default principal builder makes it; TLS or none: not known here
        self.principal: str | None = f"User:{username}" if username and security.mechanism else None

    def close(self) -> None:
        self.pool.close()

    # -- cluster and topics ----------------------------------------------------------------------

    def overview(self) -> Overview:
        with self.pool.client() as client:
            cluster = client.describe_cluster()
            _brokers, topics = client.describe_topics(None)
        sizes = partition_sizes(cluster.brokers, {b: None for b in cluster.brokers}, security=self.pool.security)
        parts = [p for t in topics for p in t.partitions]
        return Overview(cluster, broker_rows(cluster, topics, sizes), len(topics), len(parts),
                        sum(len(p.isr) < len(p.replicas) for p in parts), sum(p.leader < 0 for p in parts))

    def topics(self) -> list[TopicRow]:
        with self.pool.client() as client:
            brokers, topics = client.describe_topics(None)
            tps = [(t.name, p.partition) for t in topics for p in t.partitions]
            log_start = client.list_offsets(tps, EARLIEST, strict=False)
            log_end = client.list_offsets(tps, LATEST, strict=False)
        sizes = partition_sizes(brokers, {b: None for b in brokers}, security=self.pool.security)
        return topic_rows(topics, log_start, log_end, sizes)

    def topic(self, name: str) -> TopicDetail:
        with self.pool.client() as client:
            brokers, (topic,) = client.describe_topics([name])
            tps = [(name, p.partition) for p in topic.partitions]
            log_start = client.list_offsets(tps, EARLIEST, strict=False)
            log_end = client.list_offsets(tps, LATEST, strict=False)
            configs, configs_refused = self._topic_configs(client, name)
        hosting = {r for p in topic.partitions for r in p.replicas if r in brokers}
        sizes = partition_sizes(brokers, {b: [(name, p.partition) for p in topic.partitions if b in p.replicas]
                                          for b in hosting}, security=self.pool.security)
        return TopicDetail(topic, partition_rows(topic, log_start, log_end, sizes),
                           sorted(configs, key=lambda c: c.name), brokers, configs_refused)

    def _why(self, exc: AdminError, action: Action) -> str:
        """An error in words: a refusal as "User:alice may not DESCRIBE group g", any other as it is."""
        refusal = refusal_of(exc.code, self.principal or "this principal", action) if isinstance(
            exc, KafkaErrorResponse) else None
        return str(exc) if refusal is None else refusal.text

    def _topic_configs(self, client: AdminClient, name: str) -> tuple[list[ConfigValue], str | None]:
        """A topic's configs, or why the principal may not see them (DESCRIBE_CONFIGS is an ACL of its own)."""
        try:
            return client.describe_topic_configs([name]).get(name, []), None
        except KafkaErrorResponse as exc:
            refusal = refusal_of(exc.code, self.principal or "this principal", describe_topic(name))
            if refusal is None or refusal.resource_type != ResourceType.TOPIC:
                raise
            return [], f"{refusal.principal} may not DESCRIBE_CONFIGS topic {name}"

    def create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                     configs: dict[str, str]) -> CreatedTopic:
        with self.pool.client() as client:
            return client.create_topic(name, partitions, replication_factor, configs=configs)

    # -- messages --------------------------------------------------------------------------------

    def browse(self, query: browse.BrowseQuery, decode: browse.Decode | None = None) -> BrowseResult:
        """`decode`: a schema registry's decoder (registry.Decoder) for the keys and values in
        Confluent's wire format; None: shown as bytes."""
        with self.pool.client() as client:
            all_partitions = client.partitions_of(query.topic)
            partitions = browse.partitions_to_read(query, all_partitions)
            tps = [(query.topic, p) for p in partitions]
            log_start = client.list_offsets(tps, EARLIEST, strict=False)
            log_end = client.list_offsets(tps, LATEST, strict=False)
            by_time = client.list_offsets(tps, query.timestamp_ms, strict=False) if query.mode == "timestamp" else None
            starts = browse.start_offsets(query, log_start, log_end, by_time)
            read, scanned, next_offsets = {}, 0, {}
            fetch_bytes = max(MIN_FETCH_BYTES, BROWSE_FETCH_BYTES // max(1, len(starts)))
            for (_topic, p), (first, end) in sorted(starts.items()):
                read[p], next_offsets[p] = self._read(client, query, p, first, end, fetch_bytes)
                scanned += len(read[p])
        messages = browse.select(query, read, decode)
        next_offset = None
        if query.partition is not None and query.mode != "latest" and query.partition in next_offsets:
            shown = [m.offset for m in messages]
            candidate = max(shown) + 1 if len(shown) == query.limit else next_offsets[query.partition]
            if candidate < starts[(query.topic, query.partition)][1]:
                next_offset = candidate
        return BrowseResult(query, all_partitions, messages, scanned,
                            {tp[1]: se for tp, se in starts.items()}, next_offset)

    @staticmethod
    def _read(client: AdminClient, query: browse.BrowseQuery, partition: int, first: int, end: int,
              fetch_bytes: int):
        """Records of one partition from `first` towards `end`: until `limit` of them pass the
        filter, or the scan budget is spent. Returns (records, offset after the last one read)."""
        records, offset, kept = [], first, 0
        while offset < end and kept < query.limit and len(records) < browse.MAX_SCANNED_PER_PARTITION:
            fetched = fetch_records(client, query.topic, partition, offset, fetch_bytes)
            batch = [r for r in fetched.records if r.offset < end]
            records.extend(batch)
            kept += sum(browse.matches(r, query.filter) for r in batch)
            if fetched.next_offset <= offset:
                break  # nothing more to read (an empty answer at the high watermark)
            offset = fetched.next_offset
        return records, offset

    # -- groups ----------------------------------------------------------------------------------

    def groups(self) -> list[GroupRow]:
        """Every group (ListGroups, with its type), the first MAX_DESCRIBED_GROUPS described: a
        classic group with DescribeGroups, a consumer-protocol group with ConsumerGroupDescribe,
        a share group with ShareGroupDescribe and DescribeShareGroupOffsets."""
        with self.pool.client() as client:
            rows = []
            for i, listing in enumerate(client.list_groups()):
                if i >= MAX_DESCRIBED_GROUPS:
                    rows.append(GroupRow(listing.group_id, listing.state or "?", listing.protocol_type, None, (), None,
                                         f"not described: more than {MAX_DESCRIBED_GROUPS} groups (open its page)",
                                         listing.group_type))
                    continue
                try:
                    if listing.group_type == SHARE:
                        desc = client.describe_share_group(listing.group_id)
                        offsets = None if desc is None else client.describe_share_group_offsets(listing.group_id)
                        rows.append(share_group_row(listing.group_id, listing.state or "?", listing.protocol_type,
                                                    desc, offsets))
                        continue
                    if listing.group_type == CONSUMER:
                        desc, offsets = self._consumer_group(client, listing.group_id)
                        rows.append(consumer_group_row(
                            listing.group_id, desc.state if desc is not None else listing.state or "?",
                            listing.protocol_type, None if desc is None else _member_views(desc), offsets))
                        continue
                    desc, members, offsets = describe_group_offsets(client, listing.group_id)
                except AdminError as exc:
                    rows.append(GroupRow(listing.group_id, listing.state or "?", listing.protocol_type,
                                         None, (), None, self._why(exc, describe_group(listing.group_id)),
                                         listing.group_type))
                    continue
                rows.append(group_row(desc, members, offsets))
        return rows

    def group(self, group_id: str) -> GroupDetail:
        """A consumer-protocol group from ConsumerGroupDescribe (its epochs, each member's current
        and target assignment); any other from DescribeGroups, as before."""
        with self.pool.client() as client:
            consumer = describe_consumer_group(client, group_id)
            if consumer is not None:
                members = _member_views(consumer)
                _desc, offsets = self._consumer_group(client, group_id, consumer)
                row = consumer_group_row(group_id, consumer.state, CONSUMER, members, offsets)
                return GroupDetail(group_id, consumer.state, CONSUMER, consumer.assignor, consumer.coordinator,
                                   members, offsets, row.lag, CONSUMER, consumer_group_info(consumer))
            desc, members, offsets = describe_group_offsets(client, group_id)
        row = group_row(desc, members, offsets)
        return GroupDetail(desc.group_id, desc.state, desc.protocol_type, desc.protocol, desc.coordinator,
                           members, offsets, row.lag)

    def share_group(self, group_id: str) -> ShareGroupDetail:
        """A share group (KIP-932): ShareGroupDescribe and DescribeShareGroupOffsets, the figures
        `kbroker share-groups --describe` shows. Not a share group, or none: an AdminError saying so."""
        with self.pool.client() as client:
            desc = client.describe_share_group(group_id)
            if desc is None:
                raise share_group_not_found(client, group_id, "ShareGroupDescribe")
            offsets = client.describe_share_group_offsets(group_id) or []
        return share_group_detail(desc, offsets)

    @staticmethod
    def _consumer_group(client: AdminClient, group_id: str, desc: ConsumerGroupDescription | None = None
                        ) -> tuple[ConsumerGroupDescription | None, list[OffsetRow]]:
        """A consumer-protocol group's ConsumerGroupDescribe (`desc` when already asked; None: the
        coordinator does not describe it) and its offset rows (OffsetFetch, ListOffsets), each
        partition's owner the member holding it now."""
        if desc is None:
            desc = describe_consumer_group(client, group_id)
        members = _member_views(desc) if desc is not None else []
        committed = client.committed_offsets(group_id)
        assigned = {(t, p) for m in members for t, ps in m.assignment for p in ps}
        log_end = client.list_offsets(assigned | set(committed), LATEST, strict=False)
        return desc, offset_rows(members, committed, log_end)

    # -- samples for the charts ------------------------------------------------------------------

    def sample(self, stop: threading.Event) -> SampleRound:
        """One round of samples: ListGroups, each group's committed offsets (OffsetFetch at its
        coordinator), then one ListOffsets round at the leaders for every sampled topic's
        partitions and every committed one; at most MAX_SERIES groups and topics (by name,
        internal topics last). Raises SamplingStopped when `stop` is set between groups."""
        with self.pool.client() as client:
            # a share group commits no offsets: its lag is the share partitions' (its page shows it)
            groups = [g.group_id for g in client.list_groups() if g.group_type != SHARE][:MAX_SERIES]
            committed: dict[str, dict[tuple[str, int], int]] = {}
            for group_id in groups:
                if stop.is_set():
                    raise SamplingStopped("the console is stopping")
                try:
                    committed[group_id] = client.committed_offsets(group_id)
                except KafkaErrorResponse:
                    continue  # refused, or gone since it was listed: no point this round
            _brokers, topics = client.describe_topics(None)
            topics = sorted(topics, key=lambda t: (t.internal, t.name))[:MAX_SERIES]
            tps = {(t.name, p.partition) for t in topics for p in t.partitions}
            tps |= {tp for offsets in committed.values() for tp in offsets}
            if stop.is_set():
                raise SamplingStopped("the console is stopping")
            log_end = client.list_offsets(tps, LATEST, strict=False) if tps else {}
        return SampleRound({g: lag_of(offsets, log_end) for g, offsets in committed.items()},
                           {t.name: log_end_sum([(t.name, p.partition) for p in t.partitions], log_end)
                            for t in topics})

    def plan_reset(self, group_id: str, topic: str | None, spec: ResetSpec) -> tuple[list[PlannedOffset], list[str]]:
        with self.pool.client() as client:
            return plan_group_reset(client, group_id, spec, None if topic is None else [topic])

    def commit_offsets(self, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
        """OffsetCommit, sent only when every topic's authorized operations allow READ (the
        broker would commit the partitions of the others)."""
        with self.pool.client() as client:
            access.require_topic_operation(client, {t for t, _p in offsets}, AclOperation.READ,
                                           f"OffsetCommit for group {group_id!r}")
            client.commit_offsets(group_id, offsets)

    def plan_share_reset(self, group_id: str, topic: str | None, spec: ResetSpec
                         ) -> tuple[list[PlannedOffset], list[str]]:
        with self.pool.client() as client:
            return plan_share_group_reset(client, group_id, spec, None if topic is None else [topic])

    def alter_share_offsets(self, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
        """AlterShareGroupOffsets, sent only when every topic's authorized operations allow READ."""
        with self.pool.client() as client:
            access.require_topic_operation(client, {t for t, _p in offsets}, AclOperation.READ,
                                           f"AlterShareGroupOffsets for group {group_id!r}")
            client.alter_share_group_offsets(group_id, offsets)

    def authenticate(self) -> None:
        """Connect (TLS, SASL) to the first bootstrap broker that answers and keep the connection
        in the pool: KafkaErrorResponse when the broker refuses the credentials, AdminError when
        no broker answers."""
        with self.pool.client() as client:
            errors = []
            for host, port in client.bootstrap:
                try:
                    client.connection(host, port)
                    return
                except KafkaErrorResponse:
                    raise
                except AdminError as exc:
                    errors.append(str(exc))
            raise AdminError("; ".join(errors))

    # -- access ----------------------------------------------------------------------------------

    def acls(self, principal: str | None) -> access.AclListing:
        with self.pool.client() as client:
            return access.list_acls(client, principal)

    def may_create_topics(self) -> bool:
        """Whether to offer the create-topic form (refusals.may_create_topics); unknown: yes."""
        try:
            with self.pool.client() as client:
                operations = access.cluster_operations(client)
                if operations is None or self.principal is None:
                    return True
                try:
                    topic_acls = access.principal_acls(client, None, ResourceType.TOPIC)
                except KafkaErrorResponse:
                    topic_acls = None  # DescribeAcls refused: the principal's ACLs are not known
        except AdminError:
            return True
        return may_create_topics(operations, self.principal, topic_acls)

    def may_reset_offsets(self, group_id: str) -> bool:
        """Whether to offer a group's reset form: its authorized operations include READ (unknown: yes)."""
        try:
            with self.pool.client() as client:
                return may_reset_offsets(access.group_operations(client, group_id))
        except KafkaErrorResponse as exc:
            return exc.code not in AUTHORIZATION_ERRORS
        except AdminError:
            return True
