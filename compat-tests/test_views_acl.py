"""Filtered views as row-level access, against a broker process with Kafka's AclAuthorizer rules
(aclkit: `super.users=User:admin`, a SASL_PLAINTEXT listener with PLAIN users).

`orders` (2 partitions) holds records tagged for teams a and b and untagged ones, written by the
admin in batches that a view keeps whole, drops whole and rebuilds (one of them lz4-compressed);
`orders.team-a` is a view of it filtered on `header.team == "a"`. alice may READ and DESCRIBE the
view and READ her `team-a-` groups, and nothing on `orders`:

- she reads exactly the view's records — every acknowledged record tagged a, at its source offset,
  in order, nothing else — with confluent-kafka and kafka-python consumers, in a group and by assign;
- every path to the source's other records is refused: Fetch of `orders` by name (a hand-written
  Fetch v4, kafka-python) and by its topic id (Fetch v13), ListOffsets and OffsetForLeaderEpoch of
  `orders` (TOPIC_AUTHORIZATION_FAILED), Metadata (all topics: not listed; named: refused),
  OffsetFetch of her group (offsets committed on `orders` left out of all offsets, refused by name),
  OffsetCommit on `orders`, a view of `orders` of her own (CreateTopics, validate-only too: refused,
  while a view of a topic she may read is created), and widening her view (AlterConfigs of
  view.filter: INVALID_CONFIG, even with ALTER_CONFIGS on it);
- the view is a resource of its own: READ on `orders` alone does not read the view (carol), and bob
  with nothing reads neither.
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest

import aclkit
from aclkit import GROUP, TOPIC, Grant

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("kbroker")]

SOURCE, VIEW = "orders", "orders.team-a"
PARTITIONS = 2
TOPIC_AUTHORIZATION_FAILED = 29


@pytest.fixture(scope="module")
def acl(kt, tmp_path_factory):
    yield from aclkit.start(kt, tmp_path_factory.mktemp("views-acl"), ["alice", "bob", "carol"])


@pytest.fixture(scope="module")
def kbroker(acl):
    return acl.broker


def _team(i: int) -> list[tuple[str, bytes]]:
    return [[("team", b"a")], [("team", b"b")], [], [("team", b"a"), ("region", b"eu")], [("team", b"b")]][i % 5]


@pytest.fixture(scope="module")
def source(acl):
    """The source's acknowledged records [(partition, offset, value, headers)], the view, the ACLs."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(acl.confluent("admin"))
    for f in admin.create_topics([NewTopic(SOURCE, PARTITIONS, 1), NewTopic("alice-src", 1, 1)]).values():
        f.result(30)
    admin.create_topics([NewTopic(VIEW, -1, -1, config={"view.source": SOURCE,
                                                        "view.filter": 'header.team == "a"'})])[VIEW].result(30)
    acked = []
    phases = [("none", 20, _team), ("none", 6, lambda i: [("team", b"b")]),  # a batch matching nothing
              ("lz4", 20, _team), ("none", 6, lambda i: [("team", b"a")])]  # rebuilt, then whole
    for n, (codec, count, headers_of) in enumerate(phases):
        p = Producer({**acl.confluent("admin"), "linger.ms": 500, "compression.type": codec})
        for i in range(count):
            value, headers = f"p{n}-{i}".encode(), headers_of(i)
            p.produce(SOURCE, value, partition=i % PARTITIONS, headers=headers,
                      on_delivery=lambda err, msg, h=headers: acked.append(
                          (msg.partition(), msg.offset(), msg.value().decode(), h)) if err is None else None)
        assert p.flush(30) == 0
    assert len(acked) == sum(c for _, c, _ in phases)
    acl.grant([Grant(TOPIC, VIEW, "READ", "User:alice"), Grant(TOPIC, VIEW, "DESCRIBE", "User:alice"),
               Grant(GROUP, "team-a-", "READ", "User:alice", "PREFIXED"),
               Grant(TOPIC, "alice-", "CREATE", "User:alice", "PREFIXED"),  # she may create topics named alice-*
               Grant(TOPIC, "alice-src", "READ", "User:alice"),
               Grant(TOPIC, VIEW, "ALTER_CONFIGS", "User:alice"),
               Grant(TOPIC, SOURCE, "READ", "User:carol"), Grant(GROUP, "carol-", "READ", "User:carol", "PREFIXED")])
    return sorted(acked)


def admin_of(acl):
    from confluent_kafka.admin import AdminClient

    return AdminClient(acl.confluent("admin"))


def expected(acked) -> list[tuple[int, int, str]]:
    return [(p, o, v) for p, o, v, h in acked if ("team", b"a") in h]


# -- the reads -------------------------------------------------------------------------------------------

def _confluent_read(acl, user: str, group: str, n: int, assign: bool) -> list[tuple[int, int, str]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**acl.confluent(user), "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    got, errors = [], []
    try:
        if assign:
            c.assign([TopicPartition(VIEW, p, 0) for p in range(PARTITIONS)])
        else:
            c.subscribe([VIEW])
        deadline = time.monotonic() + 30
        settle = None
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            for m in c.consume(100, 0.3):
                if m.error():
                    errors.append(m.error().name())
                else:
                    got.append((m.partition(), m.offset(), m.value().decode()))
            if len(got) >= n and settle is None:
                settle = time.monotonic() + 1.5  # anything beyond the view's records would come now
            if errors:
                break
        if not assign and got:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return errors or sorted(got)


def _kafka_python_read(acl, user: str, group: str | None, n: int) -> list:
    import kafka

    if group is None:
        c = kafka.KafkaConsumer(group_id=None, **acl.kafka_python(user))
        tps = [kafka.TopicPartition(VIEW, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
    else:
        c = kafka.KafkaConsumer(VIEW, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                                **acl.kafka_python(user))
    got = []
    try:
        deadline = time.monotonic() + 30
        settle = None
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            for records in c.poll(timeout_ms=300).values():
                got += [(r.partition, r.offset, r.value.decode()) for r in records]
            if len(got) >= n and settle is None:
                settle = time.monotonic() + 1.5
            if not got and VIEW in c._client.cluster.unauthorized_topics:  # how kafka-python shows a refusal
                return ["TopicAuthorizationFailedError"]
        if group is not None and got:
            c.commit()
    except Exception as e:
        return [type(e).__name__]
    finally:
        c.close()
    return sorted(got)


def test_alice_reads_exactly_the_views_records(acl, source):
    want = expected(source)
    assert 0 < len(want) < len(source)
    reads = {"confluent-kafka group": _confluent_read(acl, "alice", "team-a-cf", len(want), assign=False),
             "confluent-kafka assign": _confluent_read(acl, "alice", "team-a-cf-assign", len(want), assign=True),
             "kafka-python group": _kafka_python_read(acl, "alice", "team-a-kp", len(want)),
             "kafka-python assign": _kafka_python_read(acl, "alice", None, len(want))}
    assert reads == {name: want for name in reads}


def test_the_view_is_a_resource_of_its_own(acl, source):
    """READ on the source does not read the view; nothing reads nothing."""
    from confluent_kafka.admin import AdminClient

    assert _kafka_python_read(acl, "carol", None, 1) == ["TopicAuthorizationFailedError"]
    assert _kafka_python_read(acl, "bob", None, 1) == ["TopicAuthorizationFailedError"]
    for user in ("carol", "bob"):  # librdkafka's consumer waits silently for a topic Metadata refuses
        named = AdminClient(acl.confluent(user)).list_topics(topic=VIEW, timeout=15).topics[VIEW]
        assert named.error.name() == "TOPIC_AUTHORIZATION_FAILED"
        with aclkit.RawSasl(acl, user) as conn:
            assert aclkit.fetch_v4_errors(conn.request(1, 4, aclkit.fetch_v4(VIEW, -1))) == [TOPIC_AUTHORIZATION_FAILED]
    with aclkit.RawSasl(acl, "carol") as conn:  # carol reads the source itself
        assert aclkit.fetch_v4_errors(conn.request(1, 4, aclkit.fetch_v4(SOURCE, -1))) == [0]


# -- the paths to the source ----------------------------------------------------------------------------

def _topic_id(acl, topic: str) -> bytes:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(**acl.kafka_python("admin"))
    try:
        [described] = admin.describe_topics([topic])
        return uuid.UUID(str(described["topic_id"])).bytes
    finally:
        admin.close()


def test_fetch_list_offsets_and_epochs_of_the_source_are_refused(acl, source):
    import kafka

    with aclkit.RawSasl(acl, "alice") as conn:
        for p in range(PARTITIONS):
            body = aclkit.fetch_v4(SOURCE, -1)
            body = body[:-16] + struct.pack(">iqi", p, 0, 1 << 20)  # the partition asked
            assert aclkit.fetch_v4_errors(conn.request(1, 4, body)) == [TOPIC_AUTHORIZATION_FAILED]
            assert aclkit.list_offsets_v1_answers(conn.request(2, 1, aclkit.list_offsets_v1(SOURCE, p))) == \
                [(TOPIC_AUTHORIZATION_FAILED, -1)]
        assert aclkit.epoch_v3_errors(conn.request(23, 3, aclkit.epoch_v3(SOURCE, -1))) == [TOPIC_AUTHORIZATION_FAILED]
        # by topic id (Fetch v13): the source's refused, the view's served
        error, perr, records = aclkit.fetch_v13_first(conn.flexible_request(1, 13, aclkit.fetch_v13_by_id(
            _topic_id(acl, SOURCE))))
        assert (error, perr, records) == (0, TOPIC_AUTHORIZATION_FAILED, b"")
        error, perr, records = aclkit.fetch_v13_first(conn.flexible_request(1, 13, aclkit.fetch_v13_by_id(
            _topic_id(acl, VIEW))))
        assert (error, perr) == (0, 0) and records
        # the view's own answers are there (its offsets are the source's)
        assert aclkit.list_offsets_v1_answers(conn.request(2, 1, aclkit.list_offsets_v1(VIEW, 0)))[0][0] == 0
        assert aclkit.epoch_v3_errors(conn.request(23, 3, aclkit.epoch_v3(VIEW, -1))) == [0]
    # the clients: kafka-python's end offsets of the source, and its assigned consumer
    c = kafka.KafkaConsumer(group_id=None, **acl.kafka_python("alice"))
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            c.end_offsets([kafka.TopicPartition(SOURCE, 0)])
    finally:
        c.close()


def test_metadata_does_not_list_the_source(acl, source):
    import kafka
    from confluent_kafka.admin import AdminClient

    c = kafka.KafkaConsumer(group_id=None, **acl.kafka_python("alice"))
    try:
        topics = c.topics()
    finally:
        c.close()
    assert VIEW in topics and SOURCE not in topics
    admin = AdminClient(acl.confluent("alice"))
    listed = admin.list_topics(timeout=15).topics
    assert VIEW in listed and SOURCE not in listed
    named = admin.list_topics(topic=SOURCE, timeout=15).topics[SOURCE]
    assert named.error is not None and named.error.name() == "TOPIC_AUTHORIZATION_FAILED" and not named.partitions


def test_the_groups_offsets_on_the_source_stay_hidden(acl, source, java_harness):
    """The admin commits offsets of alice's group on `orders` too: alice's OffsetFetch of all the
    group's offsets shows the view's only; named, the source's partitions are refused; she cannot
    commit on `orders` either."""
    import kafka
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    group = "team-a-offsets"
    want = expected(source)
    assert len(_kafka_python_read(acl, "alice", group, len(want))) == len(want)  # commits on the view
    admin = KafkaAdminClient(**acl.kafka_python("admin"))
    try:
        admin.alter_group_offsets(group, {kafka.TopicPartition(SOURCE, p): OffsetAndMetadata(3, "", -1)
                                          for p in range(PARTITIONS)})
        seen_by_admin = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    assert {tp.topic for tp in seen_by_admin} == {VIEW, SOURCE}

    alice = KafkaAdminClient(**acl.kafka_python("alice"))
    try:
        seen = alice.list_group_offsets({group: None})[group]
    finally:
        alice.close()
    assert {(tp.topic, tp.partition) for tp in seen} == {(VIEW, p) for p in range(PARTITIONS)}
    java = aclkit.java_script(acl, java_harness, "alice", [f"list-group-offsets {group}"])
    assert java[f"list-group-offsets {group}"]["value"] == [f"{VIEW}:{p}" for p in range(PARTITIONS)]

    cadmin = AdminClient(acl.confluent("alice"))
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(SOURCE, 0), TopicPartition(VIEW, 0)])
    answer = {tp.topic: tp for tp in cadmin.list_consumer_group_offsets([request])[group].result(30).topic_partitions}
    assert answer[SOURCE].error.name() == "TOPIC_AUTHORIZATION_FAILED"
    assert answer[VIEW].error is None and answer[VIEW].offset > 0

    c = kafka.KafkaConsumer(group_id=group, enable_auto_commit=False, **acl.kafka_python("alice"))
    try:
        tp = kafka.TopicPartition(SOURCE, 0)
        c.assign([tp])
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            c.commit({tp: OffsetAndMetadata(0, "", -1)})
    finally:
        c.close()


def test_alice_cannot_make_or_widen_a_view_of_the_source(acl, source, java_harness):
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic
    import kafka

    view_of = lambda source_topic: {"view.source": source_topic, "view.filter": "any(x) or not any(x)"}
    admin = AdminClient(acl.confluent("alice"))
    for validate_only in (True, False):
        [future] = admin.create_topics([NewTopic("alice-everything", -1, -1, config=view_of(SOURCE))],
                                       validate_only=validate_only).values()
        with pytest.raises(Exception) as refused:
            future.result(30)
        assert refused.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    kp = KafkaAdminClient(**acl.kafka_python("alice"))
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            kp.create_topics([KNewTopic("alice-everything", -1, -1, topic_configs=view_of(SOURCE))])
        # a view of a topic she may read: created (the refusal above is the source's READ)
        kp.create_topics([KNewTopic("alice-own-view", -1, -1, topic_configs=view_of("alice-src"))])
    finally:
        kp.close()
    listed = admin_of(acl).list_topics(timeout=15).topics
    assert "alice-own-view" in listed and "alice-everything" not in listed

    # widening her view: refused whatever she may alter (a view's definition is fixed)
    entry = ConfigEntry("view.filter", "any(x) or not any(x)", incremental_operation=AlterConfigOpType.SET)
    [future] = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, VIEW,
                                                               incremental_configs=[entry])]).values()
    with pytest.raises(Exception) as refused:
        future.result(30)
    assert refused.value.args[0].name() == "INVALID_CONFIG"
    java = aclkit.java_script(acl, java_harness, "alice",
                              [f"alter-configs topic {VIEW} view.filter=any(x)", f"describe-topic {SOURCE}"])
    assert java[f"alter-configs topic {VIEW} view.filter=any(x)"]["error"] == "InvalidConfigurationException"
    assert java[f"describe-topic {SOURCE}"]["error"] == "TopicAuthorizationException"
    super_admin = AdminClient(acl.confluent("admin"))
    [described] = super_admin.describe_configs([ConfigResource(ResourceType.TOPIC, VIEW)]).values()
    assert described.result(30)["view.filter"].value == 'header.team == "a"'
