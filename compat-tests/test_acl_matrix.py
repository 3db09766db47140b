"""The ACL matrix: every row of docs/security.md's "What each API checks" that a stock client reaches
on one node, against one broker process with `authorizer.class.name=kafka.security.authorizer.AclAuthorizer`,
`super.users=User:admin` and a SASL_PLAINTEXT listener (PLAIN users), each under seven cases:

| case | principal | the ACL the row's decisive check (its *target*) meets |
|---|---|---|
| allowed | alice | a LITERAL ALLOW of the operation on the resource |
| absent | bob | none for bob (the resource has an ACL, for alice): denied |
| deny | carol | the same ALLOW, and a DENY of the operation through a PREFIXED pattern (the cluster: LITERAL): denied |
| prefixed | dave | an ALLOW through a PREFIXED pattern the name starts with |
| wildcard | erin | an ALLOW on the LITERAL `*` resource of the type (the cluster, whose one name is `kafka-cluster`: an ALLOW of ALL operations) |
| anyone | frank | an ALLOW for `User:*` on the resource (not for cluster targets: it would open the cluster to every test user) |
| super | admin | nothing: a super user |

Every other check the row makes is granted to the case's principal with LITERAL ALLOWs, so a
refusal is the target's. Each row runs over two client families — kafka-python and confluent-kafka
for the data path, the Java Admin (`KbrokerHarness admin script`, one JVM per user) and kafka-python's
KafkaAdminClient for the admin rows, confluent-kafka's AdminClient too for the configs rows (SURFACES
says where a client shows a refusal its own way) — and each outcome is asserted as the client surfaces Kafka's
error: kafka-python's exception class (TopicAuthorizationFailedError, ...), librdkafka's KafkaError
name (TOPIC_AUTHORIZATION_FAILED, ...), the Java exception's simple class name
(TopicAuthorizationException, ...); listings answer "listed" or "hidden". Every resource is the
row's, the case's and the family's own (`m-<row>-<t|g>-<case>-<family>`, a transactional id named like
the row's topic), all ACLs are created in
one CreateAcls request, and the probes of different users run side by side.

The inter-broker checks no stock client sends — a Fetch with a replica id, OffsetForLeaderEpoch as
a follower, WriteTxnMarkers (CLUSTER_ACTION) — are hand-written frames (aclkit.RawSasl). The audit
log and the authorizer counters of the metrics listener are checked on the same broker.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import re
import struct
import time
import uuid
from pathlib import Path

import pytest

import aclkit
from aclkit import CLUSTER, CLUSTER_NAME, GROUP, TOPIC, TXN, Grant

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("kbroker")]

CASES = ("allowed", "absent", "deny", "prefixed", "wildcard", "anyone", "super")
USERS = {"allowed": "alice", "absent": "bob", "deny": "carol", "prefixed": "dave", "wildcard": "erin",
         "anyone": "frank", "super": "admin"}
DENIED = ("absent", "deny")
DATA, ADMIN, CONFIGS = ("kp", "cf"), ("java", "kpa"), ("java", "kpa", "cfa")
FAMILY_NAMES = {"kp": "kafka-python", "cf": "confluent-kafka", "java": "Java Admin", "kpa": "kafka-python admin",
                "cfa": "confluent-kafka admin"}
KIND_TYPE = {"topic": TOPIC, "group": GROUP, "txn": TXN, "cluster": CLUSTER}

# how each family surfaces Kafka's refusals
FORMS = {
    "TOPIC_AUTHORIZATION_FAILED": {"kp": "TopicAuthorizationFailedError", "kpa": "TopicAuthorizationFailedError",
                                   "cf": "TOPIC_AUTHORIZATION_FAILED", "cfa": "TOPIC_AUTHORIZATION_FAILED",
                                   "java": "TopicAuthorizationException"},
    "GROUP_AUTHORIZATION_FAILED": {"kp": "GroupAuthorizationFailedError", "kpa": "GroupAuthorizationFailedError",
                                   "cf": "GROUP_AUTHORIZATION_FAILED", "java": "GroupAuthorizationException"},
    "CLUSTER_AUTHORIZATION_FAILED": {"kp": "ClusterAuthorizationFailedError",
                                     "kpa": "ClusterAuthorizationFailedError", "cf": "CLUSTER_AUTHORIZATION_FAILED",
                                     "cfa": "CLUSTER_AUTHORIZATION_FAILED", "java": "ClusterAuthorizationException"},
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": {
        "kp": "TransactionalIdAuthorizationFailedError", "kpa": "TransactionalIdAuthorizationFailedError",
        "cf": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "java": "TransactionalIdAuthorizationException"},
}


@dataclasses.dataclass(frozen=True)
class Row:
    id: str
    api: str  # the table's row
    families: tuple[str, ...]
    needs: tuple[tuple[str, str], ...]  # (kind, operation): everything the row's requests check
    target: int  # the need the cases vary
    refused: str  # Kafka's error when the target is refused, or "hidden" for a listing
    setup: frozenset = frozenset()  # "records", "group", "txn", "no-topic"
    surface: tuple = ()  # (family, outcome): where a client reports the refusal otherwise (see SURFACES)

    @property
    def listing(self) -> bool:
        return self.refused == "hidden"

    def cases(self) -> tuple[str, ...]:
        cluster_target = self.needs[self.target][0] == "cluster"
        return tuple(c for c in CASES if not (c == "anyone" and cluster_target))

    def expected(self, case: str, family: str) -> str:
        if case not in DENIED:
            return "listed" if self.listing else "ok"
        surface = dict(self.surface)
        if family in surface:
            return surface[family]
        return "hidden" if self.listing else FORMS[self.refused][family]


def row(id, api, families, needs, target, refused, setup=(), surface=()):
    return Row(id, api, families, tuple(needs), target, refused, frozenset(setup), tuple(surface))


# Where a client reports a refusal other than by raising Kafka's error (the broker's answer is
# Kafka's in each case; these are the clients' ways of showing it):
# - librdkafka looks a partition's leader up in Metadata before ListOffsets: a topic the principal
#   may not DESCRIBE is not in Metadata (TOPIC_AUTHORIZATION_FAILED there), and get_watermark_offsets
#   fails with _UNKNOWN_PARTITION (Apache Kafka gives librdkafka the same Metadata answer);
# - kafka-python's describe_configs drops a resource's error (the resource comes back with no
#   configs) and its describe_log_dirs drops DescribeLogDirs's top-level error (no log dirs), as
#   librdkafka drops DescribeAcls's: confluent-kafka's AdminClient is a third family for the configs.
EMPTY, NO_LOG_DIRS = "no configs", "no log dirs"


ROWS = {r.id: r for r in (
    # -- the data path: kafka-python and confluent-kafka -------------------------------------------
    row("produce", "Produce", DATA, [("topic", "WRITE")], 0, "TOPIC_AUTHORIZATION_FAILED"),
    row("auto-create", "Metadata with auto-creation (CREATE on the topic or the cluster)", DATA,
        [("topic", "CREATE"), ("topic", "WRITE")], 0, "TOPIC_AUTHORIZATION_FAILED", ["no-topic"]),
    row("group", "FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit", DATA,
        [("topic", "READ"), ("group", "READ")], 1, "GROUP_AUTHORIZATION_FAILED", ["records"]),
    row("subscribe", "Metadata / Fetch of a subscribed topic", DATA, [("topic", "READ"), ("group", "READ")], 0,
        "TOPIC_AUTHORIZATION_FAILED", ["records"]),
    # DESCRIBE granted: the principal sees the topic in Metadata, and the Fetch itself is refused
    row("fetch", "Fetch (consumer, assigned)", DATA, [("topic", "READ"), ("topic", "DESCRIBE"), ("group", "READ")],
        0, "TOPIC_AUTHORIZATION_FAILED", ["records"]),
    row("commit", "OffsetCommit (READ on each topic)", DATA, [("group", "READ"), ("topic", "READ")], 1,
        "TOPIC_AUTHORIZATION_FAILED"),
    row("committed", "OffsetFetch (DESCRIBE on the group)", DATA, [("group", "DESCRIBE"), ("topic", "DESCRIBE")], 0,
        "GROUP_AUTHORIZATION_FAILED", ["group"]),
    row("committed-topic", "OffsetFetch (DESCRIBE on each topic named)", DATA,
        [("group", "DESCRIBE"), ("topic", "DESCRIBE")], 1, "TOPIC_AUTHORIZATION_FAILED", ["group"]),
    row("list-offsets", "ListOffsets", DATA, [("topic", "DESCRIBE")], 0, "TOPIC_AUTHORIZATION_FAILED",
        surface=[("cf", "_UNKNOWN_PARTITION")]),
    row("metadata", "Metadata of all topics", DATA, [("topic", "DESCRIBE")], 0, "hidden"),
    row("txn", "InitProducerId, EndTxn (WRITE on the transactional id)", DATA, [("txn", "WRITE"), ("topic", "WRITE")],
        0, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    row("txn-topic", "AddPartitionsToTxn (WRITE on each topic)", DATA, [("txn", "WRITE"), ("topic", "WRITE")], 1,
        "TOPIC_AUTHORIZATION_FAILED"),
    row("txn-offsets", "AddOffsetsToTxn, TxnOffsetCommit (READ on the group)", DATA,
        [("txn", "WRITE"), ("topic", "WRITE"), ("topic", "READ"), ("group", "READ")], 3, "GROUP_AUTHORIZATION_FAILED"),
    # -- the admin rows: the Java Admin and kafka-python's KafkaAdminClient ----------------------------
    row("create-topic", "CreateTopics", ADMIN, [("topic", "CREATE")], 0, "TOPIC_AUTHORIZATION_FAILED", ["no-topic"]),
    row("delete-topic", "DeleteTopics", ADMIN, [("topic", "DELETE")], 0, "TOPIC_AUTHORIZATION_FAILED"),
    row("create-partitions", "CreatePartitions", ADMIN, [("topic", "ALTER")], 0, "TOPIC_AUTHORIZATION_FAILED"),
    row("describe-topic", "Metadata of a named topic", ADMIN, [("topic", "DESCRIBE")], 0, "TOPIC_AUTHORIZATION_FAILED"),
    row("describe-configs", "DescribeConfigs of a topic", CONFIGS, [("topic", "DESCRIBE_CONFIGS")], 0,
        "TOPIC_AUTHORIZATION_FAILED", surface=[("kpa", EMPTY)]),
    row("alter-configs", "IncrementalAlterConfigs of a topic", CONFIGS, [("topic", "ALTER_CONFIGS")], 0,
        "TOPIC_AUTHORIZATION_FAILED"),
    row("describe-broker-configs", "DescribeConfigs of a broker", CONFIGS, [("cluster", "DESCRIBE_CONFIGS")], 0,
        "CLUSTER_AUTHORIZATION_FAILED", surface=[("kpa", EMPTY)]),
    row("alter-broker-configs", "IncrementalAlterConfigs of a broker", CONFIGS,
        [("cluster", "ALTER_CONFIGS")], 0, "CLUSTER_AUTHORIZATION_FAILED"),
    row("describe-group", "DescribeGroups", ADMIN, [("group", "DESCRIBE")], 0, "GROUP_AUTHORIZATION_FAILED",
        ["group"]),
    row("list-groups", "ListGroups", ADMIN, [("group", "DESCRIBE")], 0, "hidden", ["group"]),
    row("delete-group", "DeleteGroups", ADMIN, [("group", "DELETE")], 0, "GROUP_AUTHORIZATION_FAILED", ["group"]),
    row("delete-group-offsets", "OffsetDelete", ADMIN, [("group", "DELETE"), ("topic", "READ")], 0,
        "GROUP_AUTHORIZATION_FAILED", ["group"]),
    row("group-offsets", "OffsetFetch of all offsets (the others left out)", ADMIN,
        [("group", "DESCRIBE"), ("topic", "DESCRIBE")], 1, "hidden", ["group"]),
    # DESCRIBE granted: the admin clients find the partition's leader in Metadata, then are refused
    row("delete-records", "DeleteRecords", ADMIN, [("topic", "DELETE"), ("topic", "DESCRIBE")], 0,
        "TOPIC_AUTHORIZATION_FAILED", ["records"]),
    row("describe-producers", "DescribeProducers", ADMIN, [("topic", "READ"), ("topic", "DESCRIBE")], 0,
        "TOPIC_AUTHORIZATION_FAILED"),
    row("describe-log-dirs", "DescribeLogDirs", ADMIN, [("cluster", "DESCRIBE")], 0, "CLUSTER_AUTHORIZATION_FAILED",
        surface=[("kpa", NO_LOG_DIRS)]),
    row("elect", "ElectLeaders", ADMIN, [("cluster", "ALTER"), ("topic", "DESCRIBE")], 0,
        "CLUSTER_AUTHORIZATION_FAILED"),
    row("list-reassignments", "ListPartitionReassignments", ADMIN, [("cluster", "DESCRIBE")], 0,
        "CLUSTER_AUTHORIZATION_FAILED"),
    row("describe-scram", "DescribeUserScramCredentials", ADMIN, [("cluster", "DESCRIBE")], 0,
        "CLUSTER_AUTHORIZATION_FAILED"),
    row("describe-transaction", "DescribeTransactions", ADMIN, [("txn", "DESCRIBE")], 0,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", ["txn"]),
    row("list-transactions", "ListTransactions", ADMIN, [("txn", "DESCRIBE")], 0, "hidden", ["txn"]),
)}


def name(row_id: str, kind: str, case: str, family: str) -> str:
    return f"m-{row_id}-{kind[0]}-{case}-{family}"


def names(r: Row, case: str, family: str) -> dict[str, str]:
    """The row's resources for a case and family: {"topic": ..., "group": ..., "txn": ...}."""
    return {kind: name(r.id, kind, case, family) for kind, _ in r.needs if kind != "cluster"} | \
        {"cluster": CLUSTER_NAME}


def grants(r: Row, case: str, family: str) -> list[Grant]:
    user = f"User:{USERS[case]}"
    out = []
    for i, (kind, op) in enumerate(r.needs):
        rtype, res = KIND_TYPE[kind], names(r, case, family)[kind]
        cluster = kind == "cluster"
        if i != r.target:
            if case != "super":
                out.append(Grant(rtype, res, op, user))
            continue
        if case == "allowed":
            out.append(Grant(rtype, res, op, user))
        elif case == "absent" and not cluster:  # the resource has an ACL, not for bob
            out.append(Grant(rtype, res, op, "User:alice"))
        elif case == "deny":
            out.append(Grant(rtype, res, op, user))
            out.append(Grant(rtype, CLUSTER_NAME if cluster else f"m-{r.id}-{kind[0]}-de", op, user,
                             "LITERAL" if cluster else "PREFIXED", "DENY"))
        elif case == "prefixed":
            out.append(Grant(rtype, CLUSTER_NAME if cluster else f"m-{r.id}-{kind[0]}-pre", op, user, "PREFIXED"))
        elif case == "wildcard":  # the cluster has one name (`*` is refused for it): ALL operations instead
            out.append(Grant(rtype, CLUSTER_NAME, "ALL", user) if cluster else Grant(rtype, "*", op, user))
        elif case == "anyone":
            out.append(Grant(rtype, res, op, "User:*"))
    return out


# =====================================================================================================
# the probes: one call of the row's requests as `user`, the outcome as the client surfaces it

def _exc(e: BaseException) -> str:
    """kafka-python: the exception class; confluent-kafka: the KafkaError's name."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return e.args[0].name()
    # kafka-python wraps some broker errors in a plain KafkaError naming them ("Unexpected error in
    # InitProducerIdResponse: [Error 31] ClusterAuthorizationFailedError"): the error it names
    m = re.search(r"\[Error \d+\] (\w+)", str(e)) if type(e).__name__ == "KafkaError" else None
    return m.group(1) if m else type(e).__name__


def _until(deadline: float) -> bool:
    return time.monotonic() < deadline


class DataProbes:
    """kafka-python ("kp") and confluent-kafka ("cf") doing what the data-path rows need."""

    def __init__(self, ab: aclkit.AclBroker) -> None:
        self.ab = ab

    def kp(self, user: str) -> dict:
        return self.ab.kafka_python(user)

    def cf(self, user: str, **extra) -> dict:
        return {**self.ab.confluent(user), **extra}

    # -- produce -------------------------------------------------------------------------------
    def produce_kp(self, user, n):
        import kafka

        p = kafka.KafkaProducer(enable_idempotence=False, acks=1, max_block_ms=10000, **self.kp(user))
        try:
            p.send(n["topic"], b"v").get(timeout=15)
            return "ok"
        except Exception as e:
            return _exc(e)
        finally:
            p.close(timeout=5)

    def produce_cf(self, user, n):
        from confluent_kafka import Producer

        results = []
        p = Producer(self.cf(user, **{"enable.idempotence": False, "acks": 1, "message.timeout.ms": 10000}))
        p.produce(n["topic"], b"v", on_delivery=lambda err, msg: results.append(err))
        p.flush(15)
        return "no answer" if not results else "ok" if results[0] is None else results[0].name()

    auto_create_kp, auto_create_cf = produce_kp, produce_cf  # to a topic that does not exist yet

    # -- consumer groups -------------------------------------------------------------------------
    @staticmethod
    def _kp_refused(c, topic: str) -> bool:
        """kafka-python's consumer reports a topic refused in Metadata only in its cluster metadata
        (`unauthorized_topics`, and an ERROR log line "Topic ... is not authorized for this
        client"): its poll() goes on returning nothing, where the Java consumer would throw."""
        return topic in c._client.cluster.unauthorized_topics

    def _kp_group(self, user, n):
        import kafka

        c = kafka.KafkaConsumer(n["topic"], group_id=n["group"], auto_offset_reset="earliest",
                                enable_auto_commit=False, **self.kp(user))
        try:
            deadline, got = time.monotonic() + 20, 0
            while not got and _until(deadline):
                got += sum(len(rs) for rs in c.poll(timeout_ms=500).values())
                if not got and self._kp_refused(c, n["topic"]):
                    return "TopicAuthorizationFailedError"
            if not got:
                return "no records"
            c.commit()
            return "ok"
        except Exception as e:
            return _exc(e)
        finally:
            c.close()

    def _cf_group(self, user, n):
        from confluent_kafka import Consumer, KafkaException

        errors = []
        c = Consumer(self.cf(user, **{"group.id": n["group"], "auto.offset.reset": "earliest",
                                      "enable.auto.commit": False, "error_cb": errors.append}))
        try:
            c.subscribe([n["topic"]])
            deadline = time.monotonic() + 20
            while _until(deadline) and not errors:
                for m in c.consume(10, 0.5):
                    if m.error():
                        errors.append(m.error())
                    else:
                        c.commit(asynchronous=False)
                        return "ok"
            return errors[0].name() if errors else "no records"
        except KafkaException as e:
            return _exc(e)
        finally:
            c.close()

    group_kp = subscribe_kp = _kp_group
    group_cf = subscribe_cf = _cf_group

    def fetch_kp(self, user, n):
        import kafka

        c = kafka.KafkaConsumer(group_id=None, **self.kp(user))
        try:
            tp = kafka.TopicPartition(n["topic"], 0)
            c.assign([tp])
            c.seek(tp, 0)
            deadline = time.monotonic() + 15
            while _until(deadline):
                if any(c.poll(timeout_ms=500).values()):
                    return "ok"
            return "no records"
        except Exception as e:
            return _exc(e)
        finally:
            c.close()

    def fetch_cf(self, user, n):
        from confluent_kafka import Consumer, TopicPartition

        # librdkafka's consumer needs a group.id and looks its coordinator up even when it only assigns
        c = Consumer(self.cf(user, **{"group.id": n["group"], "enable.auto.commit": False}))
        try:
            c.assign([TopicPartition(n["topic"], 0, 0)])
            deadline = time.monotonic() + 15
            while _until(deadline):
                for m in c.consume(10, 0.5):
                    return m.error().name() if m.error() else "ok"
            return "no records"
        finally:
            c.close()

    def commit_kp(self, user, n):
        import kafka
        from kafka.structs import OffsetAndMetadata

        c = kafka.KafkaConsumer(group_id=n["group"], enable_auto_commit=False, **self.kp(user))
        try:
            tp = kafka.TopicPartition(n["topic"], 0)
            c.assign([tp])
            c.commit({tp: OffsetAndMetadata(1, "", -1)})
            return "ok"
        except Exception as e:
            return _exc(e)
        finally:
            c.close()

    def commit_cf(self, user, n):
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        c = Consumer(self.cf(user, **{"group.id": n["group"], "enable.auto.commit": False}))
        try:
            c.assign([TopicPartition(n["topic"], 0)])
            result = c.commit(offsets=[TopicPartition(n["topic"], 0, 1)], asynchronous=False)
            errors = [tp.error for tp in result or () if tp.error]
            return errors[0].name() if errors else "ok"
        except KafkaException as e:
            return _exc(e)
        finally:
            c.close()

    def _committed_kp(self, user, n):
        import kafka

        c = kafka.KafkaConsumer(group_id=n["group"], enable_auto_commit=False, **self.kp(user))
        try:
            offset = c.committed(kafka.TopicPartition(n["topic"], 0))
            return "ok" if offset == 1 else f"committed {offset}"
        except Exception as e:
            return _exc(e)
        finally:
            c.close()

    def _committed_cf(self, user, n):
        """OffsetFetch of one named partition through confluent-kafka's AdminClient
        (list_consumer_group_offsets); librdkafka's consumer.committed() retries a refused
        coordinator lookup until its timeout (_TIMED_OUT) instead of reporting it."""
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self.cf(user))
        request = ConsumerGroupTopicPartitions(n["group"], [TopicPartition(n["topic"], 0)])
        try:
            [tp] = admin.list_consumer_group_offsets([request], request_timeout=15)[n["group"]] \
                .result(20).topic_partitions
            if tp.error:
                return tp.error.name()
            return "ok" if tp.offset == 1 else f"committed {tp.offset}"
        except KafkaException as e:
            return _exc(e)

    committed_kp = committed_topic_kp = _committed_kp
    committed_cf = committed_topic_cf = _committed_cf

    def list_offsets_kp(self, user, n):
        import kafka

        c = kafka.KafkaConsumer(group_id=None, **self.kp(user))
        try:
            tp = kafka.TopicPartition(n["topic"], 0)
            c.end_offsets([tp])
            return "ok"
        except Exception as e:
            return _exc(e)
        finally:
            c.close()

    def list_offsets_cf(self, user, n):
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        c = Consumer(self.cf(user, **{"group.id": "m-unused", "enable.auto.commit": False}))
        try:
            c.get_watermark_offsets(TopicPartition(n["topic"], 0), timeout=15)
            return "ok"
        except KafkaException as e:
            return _exc(e)
        finally:
            c.close()

    def metadata_kp(self, user, n):
        import kafka

        c = kafka.KafkaConsumer(group_id=None, **self.kp(user))
        try:
            return "listed" if n["topic"] in c.topics() else "hidden"
        finally:
            c.close()

    def metadata_cf(self, user, n):
        from confluent_kafka.admin import AdminClient

        topics = AdminClient(self.cf(user)).list_topics(timeout=15).topics
        return "listed" if n["topic"] in topics else "hidden"

    # -- transactions ------------------------------------------------------------------------------
    def _txn_kp(self, user, n, offsets: bool):
        import kafka
        from kafka.structs import OffsetAndMetadata

        p = kafka.KafkaProducer(transactional_id=n["txn"], max_block_ms=15000, **self.kp(user))
        try:
            p.init_transactions()
            p.begin_transaction()
            p.send(n["topic"], b"v").get(timeout=15)
            if offsets:
                p.send_offsets_to_transaction({kafka.TopicPartition(n["topic"], 0): OffsetAndMetadata(1, "", -1)},
                                              n["group"])
            p.commit_transaction()
            return "ok"
        except Exception as e:
            return _exc(e)
        finally:
            p.close(timeout=5)

    def _txn_cf(self, user, n, offsets: bool):
        from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

        results = []
        p = Producer(self.cf(user, **{"transactional.id": n["txn"], "message.timeout.ms": 15000,
                                      "transaction.timeout.ms": 30000}))
        try:
            p.init_transactions(15)
            p.begin_transaction()
            p.produce(n["topic"], b"v", on_delivery=lambda err, msg: results.append(err))
            p.flush(15)
            if offsets and not any(results):
                metadata = Consumer(self.cf(user, **{"group.id": n["group"]})).consumer_group_metadata()
                p.send_offsets_to_transaction([TopicPartition(n["topic"], 0, 1)], metadata, 15)
            # a partition refused by AddPartitionsToTxn fails the transaction (abortable): librdkafka
            # purges the record (_PURGE_QUEUE to its delivery report) and commit raises the broker's error
            p.commit_transaction(15)
            return results[0].name() if results and results[0] is not None else "ok"
        except KafkaException as e:
            # a topic the principal may not even DESCRIBE fails the record itself (Metadata's
            # TOPIC_AUTHORIZATION_FAILED), and the commit then raises _INCONSISTENT
            failed = [r.name() for r in results if r is not None and r.name() != "_PURGE_QUEUE"]
            return failed[0] if failed else _exc(e)

    def txn_kp(self, user, n):
        return self._txn_kp(user, n, False)

    def txn_cf(self, user, n):
        return self._txn_cf(user, n, False)

    txn_topic_kp, txn_topic_cf = txn_kp, txn_cf

    def txn_offsets_kp(self, user, n):
        return self._txn_kp(user, n, True)

    def txn_offsets_cf(self, user, n):
        return self._txn_cf(user, n, True)


class KafkaPythonAdmin:
    """The admin rows through one kafka-python KafkaAdminClient."""

    def __init__(self, ab: aclkit.AclBroker, user: str) -> None:
        from kafka.admin import KafkaAdminClient

        self.client = KafkaAdminClient(**ab.kafka_python(user))

    def close(self) -> None:
        self.client.close()

    def run(self, row_id: str, n: dict) -> str:
        try:
            return getattr(self, row_id.replace("-", "_"))(n)
        except Exception as e:
            return _exc(e)

    @staticmethod
    def _error(code: int) -> str:
        import kafka.errors as ke

        return "ok" if code == 0 else ke.for_code(code).__name__

    def create_topic(self, n):
        from kafka.admin import NewTopic

        self.client.create_topics([NewTopic(n["topic"], 1, 1)])
        return "ok"

    def delete_topic(self, n):
        self.client.delete_topics([n["topic"]])
        return "ok"

    def create_partitions(self, n):
        from kafka.admin import NewPartitions

        self.client.create_partitions({n["topic"]: NewPartitions(2)})
        return "ok"

    def describe_topic(self, n):
        [topic] = self.client.describe_topics([n["topic"]])
        return self._error(topic["error_code"])

    def _configs(self, resource, alter=None):
        """kafka-python 3.0 answers {type: {name: configs}} (a refused resource: no configs, its error
        dropped) and, altering, {type: {name: "OK" | "[Error 29] TopicAuthorizationFailedError: ..."}}."""
        from kafka.admin import ConfigResource, ConfigResourceType

        rtype = ConfigResourceType[resource[0]]
        if alter is None:
            result = self.client.describe_configs([ConfigResource(rtype, resource[1])], config_filter="all")
            return "ok" if result[resource[0].lower()][resource[1]] else EMPTY
        result = self.client.alter_configs([ConfigResource(rtype, resource[1], configs=alter)], incremental=True,
                                           raise_on_unknown=False)
        answer = result[resource[0].lower()][resource[1]]
        if answer == "OK":
            return "ok"
        m = re.search(r"([A-Za-z]+Error)", answer)
        return m.group(1) if m else answer

    def describe_configs(self, n):
        return self._configs(("TOPIC", n["topic"]))

    def alter_configs(self, n):
        return self._configs(("TOPIC", n["topic"]), {"retention.ms": "86400000"})

    def describe_broker_configs(self, n):
        return self._configs(("BROKER", "0"))

    def alter_broker_configs(self, n):
        return self._configs(("BROKER", "0"), {"log.cleaner.backoff.ms": "15000"})

    def describe_group(self, n):
        self.client.describe_groups([n["group"]])
        return "ok"

    def list_groups(self, n):
        groups = self.client.list_groups()
        ids = {g["group_id"] if isinstance(g, dict) else g[0] for g in groups}
        return "listed" if n["group"] in ids else "hidden"

    def delete_group(self, n):
        answer = self.client.delete_groups([n["group"]])[n["group"]]  # {group: "OK" | error name}
        return "ok" if answer in (None, "OK", "NoError") else getattr(answer, "__name__", str(answer))

    def delete_group_offsets(self, n):
        from kafka import TopicPartition

        result = self.client.delete_group_offsets(n["group"], [TopicPartition(n["topic"], 0)])
        errors = [e for e in (result or {}).values() if e is not None and getattr(e, "errno", 0)] \
            if isinstance(result, dict) else []
        return type(errors[0]).__name__ if errors else "ok"

    def group_offsets(self, n):
        result = self.client.list_group_offsets({n["group"]: None})
        offsets = result[n["group"]] if isinstance(result, dict) and n["group"] in result else result
        return "listed" if any(tp.topic == n["topic"] for tp in offsets) else "hidden"

    def delete_records(self, n):
        from kafka import TopicPartition

        self.client.delete_records({TopicPartition(n["topic"], 0): 1})
        return "ok"

    def describe_producers(self, n):
        from kafka import TopicPartition

        self.client.describe_producers([TopicPartition(n["topic"], 0)])
        return "ok"

    def describe_log_dirs(self, n):
        [broker] = self.client.describe_log_dirs()
        return "ok" if broker["log_dirs"] else NO_LOG_DIRS

    def elect(self, n):
        self.client.elect_leaders(0, {n["topic"]: [0]})  # preferred; ELECTION_NOT_NEEDED is no error to it
        return "ok"

    def list_reassignments(self, n):
        self.client.list_partition_reassignments()
        return "ok"

    def describe_scram(self, n):
        self.client.describe_user_scram_credentials()
        return "ok"

    def describe_transaction(self, n):
        self.client.describe_transactions([n["txn"]])
        return "ok"

    def list_transactions(self, n):
        listed = self.client.list_transactions()  # {broker: [TransactionListing]}
        ids = {t.transactional_id for listings in listed.values() for t in listings}
        return "listed" if n["txn"] in ids else "hidden"


class ConfluentAdmin:
    """The configs rows through confluent-kafka's AdminClient (describe_configs,
    incremental_alter_configs)."""

    def __init__(self, ab: aclkit.AclBroker, user: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.client = AdminClient(ab.confluent(user))

    def close(self) -> None:
        pass

    def run(self, row_id: str, n: dict) -> str:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        resource = {"describe-configs": (ResourceType.TOPIC, n.get("topic")),
                    "alter-configs": (ResourceType.TOPIC, n.get("topic")),
                    "describe-broker-configs": (ResourceType.BROKER, "0"),
                    "alter-broker-configs": (ResourceType.BROKER, "0")}[row_id]
        try:
            if row_id.startswith("describe"):
                [future] = self.client.describe_configs([ConfigResource(*resource)], request_timeout=15).values()
                return "ok" if future.result(20) else EMPTY
            key, value = ("retention.ms", "86400000") if resource[0] == ResourceType.TOPIC \
                else ("log.cleaner.backoff.ms", "15000")
            entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            [future] = self.client.incremental_alter_configs([ConfigResource(*resource, incremental_configs=[entry])],
                                                             request_timeout=15).values()
            future.result(20)
            return "ok"
        except Exception as e:
            return _exc(e)


JAVA_CALLS = {
    "create-topic": "create-topic {topic}", "delete-topic": "delete-topic {topic}",
    "create-partitions": "create-partitions {topic} 2", "describe-topic": "describe-topic {topic}",
    "describe-configs": "describe-configs topic {topic}",
    "alter-configs": "alter-configs topic {topic} retention.ms=86400000",
    "describe-broker-configs": "describe-configs broker 0",
    "alter-broker-configs": "alter-configs broker 0 log.cleaner.backoff.ms=15000",
    "describe-group": "describe-group {group}", "list-groups": "list-groups",
    "delete-group": "delete-group {group}", "delete-group-offsets": "delete-group-offsets {group} {topic} 0",
    "group-offsets": "list-group-offsets {group}", "delete-records": "delete-records {topic} 0 1",
    "describe-producers": "describe-producers {topic} 0", "describe-log-dirs": "describe-log-dirs 0",
    "elect": "elect {topic} 0", "list-reassignments": "list-reassignments",
    "describe-scram": "describe-scram", "describe-transaction": "describe-transaction {txn}",
    "list-transactions": "list-transactions",
}


def java_outcome(r: Row, n: dict, outcome: dict) -> str:
    if "error" in outcome:
        return outcome["error"]
    value = outcome.get("value")
    if r.id == "list-groups":
        return "listed" if n["group"] in value else "hidden"
    if r.id == "list-transactions":
        return "listed" if n["txn"] in value else "hidden"
    if r.id == "group-offsets":
        return "listed" if f"{n['topic']}:0" in value else "hidden"
    if r.id == "elect":
        return "ok" if value in ("none", "ElectionNotNeededException") else value
    return "ok"


# =====================================================================================================
# the module's broker and the matrix run once

@pytest.fixture(scope="module")
def acl(kt, tmp_path_factory):
    yield from aclkit.start(kt, tmp_path_factory.mktemp("acl-matrix"),
                            [u for u in USERS.values() if u != "admin"] + ["gina", "hank", "ivan", "judy"])


@pytest.fixture(scope="module")
def kbroker(acl):
    return acl.broker


def _setup(ab: aclkit.AclBroker) -> None:
    """Topics (a record in each), groups with a committed offset, transactional ids that exist, and
    every ACL of the matrix in one CreateAcls request."""
    import kafka
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    topics, records, groups, txns, acls = [], [], [], [], []
    for r in ROWS.values():
        for case in r.cases():
            for fam in r.families:
                n = names(r, case, fam)
                acls += grants(r, case, fam)
                if "topic" in n and "no-topic" not in r.setup:
                    topics.append(n["topic"])
                    if "records" in r.setup or "group" in r.setup:
                        records.append(n["topic"])
                if "group" in r.setup:
                    groups.append((n["group"], n.get("topic") or "m-shared"))
                if "txn" in r.setup:
                    txns.append(n["txn"])
    topics.append("m-shared")
    admin = AdminClient(ab.confluent("admin"))
    for t, future in admin.create_topics([NewTopic(t, 1, 1) for t in topics], request_timeout=60).items():
        future.result(60)
    p = Producer({**ab.confluent("admin"), "linger.ms": 50})
    for t in records + ["m-shared"]:
        p.produce(t, b"record", partition=0)
    assert p.flush(30) == 0
    kadmin = KafkaAdminClient(**ab.kafka_python("admin"))
    try:
        for group, topic in groups:
            kadmin.alter_group_offsets(group, {kafka.TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
    finally:
        kadmin.close()

    def init(txn):
        tp = Producer({**ab.confluent("admin"), "transactional.id": txn})
        tp.init_transactions(30)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(init, txns))
    ab.grant(acls)


@pytest.fixture(scope="module")
def matrix(acl, java_harness):
    """{(row, case, family): outcome} of every probe, run side by side per user."""
    started = time.monotonic()
    _setup(acl)
    set_up = time.monotonic() - started
    data = DataProbes(acl)
    jobs = []  # (key, callable)
    for r in ROWS.values():
        for case in r.cases():
            user = USERS[case]
            n = names(r, case, "kp"), names(r, case, "cf")
            if r.families == DATA:
                for fam, nn in zip(DATA, n):
                    probe = getattr(data, f"{r.id.replace('-', '_')}_{fam}")
                    jobs.append(((r.id, case, fam), user, lambda p=probe, u=user, nn=nn: p(u, nn)))
    out: dict[tuple[str, str, str], str] = {}

    def java_for(case: str) -> dict:
        user = USERS[case]
        calls, keys = [], []
        for r in ROWS.values():
            if "java" in r.families and case in r.cases():
                n = names(r, case, "java")
                calls.append(JAVA_CALLS[r.id].format(case=case, **n))
                keys.append((r, n))
        results = aclkit.java_script(acl, java_harness, user, calls)  # one call of each row: each line unique
        return {(r.id, case, "java"): java_outcome(r, n, results[c]) for c, (r, n) in zip(calls, keys)}

    def admin_for(family: str, case: str) -> dict:
        admin = (KafkaPythonAdmin if family == "kpa" else ConfluentAdmin)(acl, USERS[case])
        try:
            return {(r.id, case, family): admin.run(r.id, names(r, case, family))
                    for r in ROWS.values() if family in r.families and case in r.cases()}
        finally:
            admin.close()

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        futures = {pool.submit(java_for, case): ("java", case) for case in CASES}
        futures.update({pool.submit(admin_for, fam, case): (fam, case) for case in CASES for fam in ("kpa", "cfa")})
        futures.update({pool.submit(fn): key for key, _user, fn in jobs})
        for future in concurrent.futures.as_completed(futures):
            key = futures[future]
            try:
                result = future.result()
            except Exception as e:  # a probe that broke is an outcome too
                result = f"probe failed: {e!r}"[:300]
            if isinstance(result, dict):
                out.update(result)
            elif isinstance(key, tuple) and len(key) == 3:
                out[key] = result
            else:
                fam, case = key
                for r in ROWS.values():
                    if fam in r.families and case in r.cases():
                        out[(r.id, case, fam)] = result
    print(f"ACL matrix: set up in {set_up:.1f} s, {len(out)} probes in {time.monotonic() - started - set_up:.1f} s")
    dump = os.environ.get("KBROKER_ACL_MATRIX_DUMP")  # every outcome, for a look at the whole matrix
    if dump:
        Path(dump).write_text(json.dumps({" ".join(k): v for k, v in sorted(out.items())}, indent=1))
    return out


@pytest.mark.parametrize("row_id", list(ROWS))
def test_matrix(matrix, row_id):
    r = ROWS[row_id]
    expected = {(case, fam): r.expected(case, fam) for case in r.cases() for fam in r.families}
    got = {(case, fam): matrix.get((r.id, case, fam), "not run") for case in r.cases() for fam in r.families}
    wrong = {k: (expected[k], got[k]) for k in expected if expected[k] != got[k]}
    assert not wrong, (f"{r.api}: (case, family): (expected, got) for the cases that differ:\n" +
                       "\n".join(f"  {case:9} {FAMILY_NAMES[fam]:20} expected {e!r:45} got {g!r}"
                                 for (case, fam), (e, g) in sorted(wrong.items())))


# =====================================================================================================
# InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic

def test_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(acl):
    """gina: DESCRIBE only (CLUSTER_AUTHORIZATION_FAILED from InitProducerId); hank: IDEMPOTENT_WRITE on
    the cluster only (the producer id is granted, the topic refused); ivan: WRITE through a prefix
    (Kafka's authorizeByResourceType: enough for InitProducerId); judy: WRITE on the topic and a
    DENY of WRITE on every topic (`*`): refused as if she had nothing."""
    from confluent_kafka import Producer
    import kafka

    topic = "m-idem-topic"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(acl.confluent("admin"))  # referenced until the future is done (librdkafka: _DESTROY)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    # WRITE for `User:*` on any topic lets everyone init a producer id (the matrix's "anyone" case
    # makes some): gone first, so that gina has nothing
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, \
        ResourceType

    everyone = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:*", None,
                                AclOperation.WRITE, AclPermissionType.ALLOW)
    admin.delete_acls([everyone])[everyone].result(30)
    acl.grant([Grant(TOPIC, topic, "DESCRIBE", "User:gina"),  # she sees the topic: only her producer id is refused
               Grant(CLUSTER, CLUSTER_NAME, "IDEMPOTENT_WRITE", "User:hank"),
               Grant(TOPIC, "m-idem-", "WRITE", "User:ivan", "PREFIXED"),
               Grant(TOPIC, topic, "WRITE", "User:judy"), Grant(TOPIC, "*", "WRITE", "User:judy", permission="DENY")])

    def kp(user):
        p = kafka.KafkaProducer(enable_idempotence=True, acks="all", max_block_ms=10000, **acl.kafka_python(user))
        try:
            p.send(topic, b"v").get(timeout=15)
            return "ok"
        except Exception as e:
            return _exc(e)
        finally:
            p.close(timeout=5)

    def cf(user):
        from confluent_kafka import KafkaException

        results = []
        p = Producer({**acl.confluent(user), "enable.idempotence": True, "message.timeout.ms": 10000})
        try:
            p.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
            p.flush(15)
        except KafkaException as e:  # librdkafka's fatal error: the producer id was refused
            return _exc(e)
        except SystemError as e:  # the same, raised while the purged record's delivery report ran
            if isinstance(e.__cause__, KafkaException):
                return _exc(e.__cause__)
            raise
        if not results:
            return "no answer"
        return "ok" if results[0] is None else results[0].name()

    got = {user: (kp(user), cf(user)) for user in ("gina", "hank", "ivan", "judy", "admin")}
    assert got == {
        "gina": ("ClusterAuthorizationFailedError", "CLUSTER_AUTHORIZATION_FAILED"),
        "hank": ("TopicAuthorizationFailedError", "TOPIC_AUTHORIZATION_FAILED"),
        "ivan": ("ok", "ok"),
        "judy": ("ClusterAuthorizationFailedError", "CLUSTER_AUTHORIZATION_FAILED"),
        "admin": ("ok", "ok"),
    }, got


# =====================================================================================================
# inter-broker requests no stock client sends: hand-written frames

def _write_txn_markers_v1(topic: str, producer_id: int) -> bytes:
    """One marker (compact arrays and strings, tagged fields): an abort for `producer_id` on the topic's partition 0."""
    u = aclkit.uvarint
    topics = u(2) + aclkit.compact_string(topic) + u(2) + struct.pack(">i", 0) + b"\x00"
    marker = struct.pack(">qhb", producer_id, 0, 0) + topics + struct.pack(">i", 0) + b"\x00"
    return u(2) + marker + b"\x00"


def _write_txn_markers_v1_errors(body: bytes) -> list[int]:
    pos = 0
    nmarkers, pos = aclkit.read_uvarint(body, pos)
    errors = []
    for _ in range(nmarkers - 1):
        pos += 8  # producer id
        ntopics, pos = aclkit.read_uvarint(body, pos)
        for _ in range(ntopics - 1):
            nlen, pos = aclkit.read_uvarint(body, pos)
            pos += nlen - 1
            nparts, pos = aclkit.read_uvarint(body, pos)
            for _ in range(nparts - 1):
                _p, err = struct.unpack_from(">ih", body, pos)
                errors.append(err)
                pos += 6
                ntags, pos = aclkit.read_uvarint(body, pos)
            ntags, pos = aclkit.read_uvarint(body, pos)
        ntags, pos = aclkit.read_uvarint(body, pos)
    return errors


TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 31
RAW_CASES = ("allowed", "absent", "deny", "prefixed", "wildcard", "super")


@pytest.fixture(scope="module")
def raw_topic(acl):
    """A topic with a record, readable by everyone (READ for `User:*`), and CLUSTER_ACTION per case."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "m-raw"
    admin = AdminClient(acl.confluent("admin"))  # referenced until the future is done (librdkafka: _DESTROY)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer(acl.confluent("admin"))
    p.produce(topic, b"r", partition=0)
    p.flush(10)
    acl.grant([Grant(TOPIC, topic, "ALL", "User:*"),
               Grant(CLUSTER, CLUSTER_NAME, "CLUSTER_ACTION", "User:alice"),
               Grant(CLUSTER, CLUSTER_NAME, "CLUSTER_ACTION", "User:carol"),
               Grant(CLUSTER, CLUSTER_NAME, "CLUSTER_ACTION", "User:carol", permission="DENY"),
               Grant(CLUSTER, CLUSTER_NAME, "CLUSTER_ACTION", "User:dave", "PREFIXED"),
               Grant(CLUSTER, CLUSTER_NAME, "ALL", "User:erin")])
    return topic


def _raw(acl, case: str, api_key: int, version: int, body: bytes) -> bytes:
    with aclkit.RawSasl(acl, USERS[case]) as conn:
        return conn.request(api_key, version, body)


def test_follower_fetch_needs_cluster_action(acl, raw_topic):
    """Fetch with a replica id: CLUSTER_ACTION, else TOPIC_AUTHORIZATION_FAILED for every partition
    (whatever the principal may READ: everyone may read this topic as a consumer)."""
    got = {case: aclkit.fetch_v4_errors(_raw(acl, case, 1, 4, aclkit.fetch_v4(raw_topic, 1)))[0] for case in RAW_CASES}
    consumer = {case: aclkit.fetch_v4_errors(_raw(acl, case, 1, 4, aclkit.fetch_v4(raw_topic, -1)))[0]
                for case in RAW_CASES}
    assert consumer == {case: 0 for case in RAW_CASES}
    assert {case: got[case] == TOPIC_AUTHORIZATION_FAILED for case in RAW_CASES} == \
        {case: case in DENIED for case in RAW_CASES}, got


def test_follower_offset_for_leader_epoch_needs_cluster_action(acl, raw_topic):
    got = {case: aclkit.epoch_v3_errors(_raw(acl, case, 23, 3, aclkit.epoch_v3(raw_topic, 1)))[0] for case in RAW_CASES}
    assert {case: got[case] == CLUSTER_AUTHORIZATION_FAILED for case in RAW_CASES} == \
        {case: case in DENIED for case in RAW_CASES}, got
    consumer = {case: aclkit.epoch_v3_errors(_raw(acl, case, 23, 3, aclkit.epoch_v3(raw_topic, -1)))[0]
                for case in RAW_CASES}
    assert consumer == {case: 0 for case in RAW_CASES}


def test_write_txn_markers_needs_cluster_action(acl, raw_topic):
    got = {}
    for case in RAW_CASES:
        with aclkit.RawSasl(acl, USERS[case]) as conn:
            answer = conn.flexible_request(27, 1, _write_txn_markers_v1(raw_topic, 987654))
            got[case] = _write_txn_markers_v1_errors(answer)
    assert {case: got[case] == [CLUSTER_AUTHORIZATION_FAILED] for case in RAW_CASES} == \
        {case: case in DENIED for case in RAW_CASES}, got


# =====================================================================================================
# the audit log and the metrics listener

def test_denials_are_logged_once_a_minute_and_counted(acl):
    """Twenty refused produce requests and twenty refused fetches of one principal: one line each
    in Kafka's words on `kbroker.authorizer`; the metrics listener's denied counter counts all."""
    from confluent_kafka.admin import AdminClient, NewTopic
    import kafka

    topic = f"m-audit-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(acl.confluent("admin"))  # referenced until the future is done (librdkafka: _DESTROY)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    acl.grant([Grant(TOPIC, topic, "DESCRIBE", "User:bob")])  # bob may see it, not write or read it
    before = acl.metrics()
    p = kafka.KafkaProducer(enable_idempotence=False, acks=1, retries=0, max_block_ms=10000,
                            **acl.kafka_python("bob"))
    try:
        for _ in range(20):
            with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
                p.send(topic, b"v").get(timeout=15)
    finally:
        p.close(timeout=5)
    for _ in range(20):
        with aclkit.RawSasl(acl, "bob") as conn:
            answer = conn.request(1, 4, aclkit.fetch_v4(topic, -1))
            assert aclkit.fetch_v4_errors(answer) == [TOPIC_AUTHORIZATION_FAILED]
    after = acl.metrics()
    lines = [line for line in acl.audit_lines() if f"Topic:LITERAL:{topic}" in line]
    writes = [line for line in lines if "Operation = Write" in line]
    reads = [line for line in lines if "Operation = Read" in line]
    assert len(writes) == 1 and len(reads) == 1, lines
    assert writes[0].split("kbroker.authorizer", 1)[1].strip(" :-").endswith(
        f"Principal = User:bob is Denied Operation = Write from host = 127.0.0.1 on resource = Topic:LITERAL:{topic} "
        f"for request = Produce with resourceRefCount = 1"), writes[0]
    assert "for request = Fetch" in reads[0] and "INFO" in reads[0]
    denied = "kafka_server_authorizer_metrics_authorization_denied_rate_total"
    allowed = "kafka_server_authorizer_metrics_authorization_allowed_rate_total"
    assert after[denied] - before[denied] >= 40
    assert after[allowed] > before[allowed]  # bob's Metadata (DESCRIBE) and the admin's requests
    assert after["kafka_server_authorizer_metrics_authorization_request_rate_total"] == after[allowed] + after[denied]
    assert after["kafka_server_authorizer_metrics_acls_total_count"] > 100
