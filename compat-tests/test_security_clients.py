"""Every client family through every security protocol, written once over securitykit's adapters.

One broker for the module serves PLAINTEXT, SSL, MTLS (SSL with `ssl.client.auth=required` and
`ssl.principal.mapping.rules`), SASL_PLAINTEXT and SASL_SSL, with PLAIN (JAAS users), SCRAM-SHA-256
and SCRAM-SHA-512 (users created through the PLAINTEXT listener with AlterUserScramCredentials) and
OAUTHBEARER (unsecured tokens). Certificates are made for the run (securitykit.make_pki); SSL and
MTLS read PKCS12 keystores, SASL_SSL a PEM keystore file with an encrypted key.

Each case: a 3-partition topic (made through PLAINTEXT), N keyed records with headers and one
~40 kB value per partition produced by the family's idempotent producer through the listener under
test, then read back by a consumer-group member of the same family through the same listener:
exact content, per-partition order, offsets dense from 0 (and equal to the producer's
acknowledgements where the client reports them). Checked through PLAINTEXT afterwards: the
idempotent producer is known to the broker (DescribeProducers: a producer id, last sequence = the
records it sent to the partition) and the group committed the end of every partition.

Matrix: kafka-python, confluent-kafka and aiokafka run every case (SSL, SSL+mTLS, and
SASL_PLAINTEXT / SASL_SSL x PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512 / OAUTHBEARER); kcat (librdkafka
2.0.2) and the Java kafka-clients 3.9 harness, whose processes cost more (a JVM start is ~2 s), run
SASL_SSL+SCRAM-SHA-512, SSL+mTLS, SASL_PLAINTEXT+PLAIN and SASL_SSL+OAUTHBEARER.
"""

from __future__ import annotations

import uuid

import pytest
import securitykit as sk

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("kbroker")]

PYTHON_FAMILIES = ("kafka-python", "confluent-kafka", "aiokafka")
PROCESS_FAMILIES = ("kcat", "java")
PROCESS_CASES = ("sasl_ssl-scram-sha-512", "ssl-mtls", "sasl_plaintext-plain", "sasl_ssl-oauthbearer")
MATRIX = [(f, c) for f in PYTHON_FAMILIES for c in sk.CASES] + [(f, c) for f in PROCESS_FAMILIES for c in PROCESS_CASES]


@pytest.fixture(scope="module")
def secure(kt, tmp_path_factory):
    yield from sk.running_setup(kt, tmp_path_factory.mktemp("security-clients"))


@pytest.fixture(scope="module")
def kbroker(secure):
    """The module's broker, under the name conftest's guard and failure reports look for."""
    return secure.broker


def _idempotent_producers(bootstrap, topic, partitions):
    """DescribeProducers through PLAINTEXT (kafka-python's admin): partition -> [(producer id, last sequence)]."""
    import kafka

    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        tps = [kafka.TopicPartition(topic, p) for p in partitions]
        described = admin.describe_producers(tps)
        return {tp.partition: [(s.producer_id, s.last_sequence) for s in described[tp].active_producers] for tp in tps}
    finally:
        admin.close()


@pytest.mark.parametrize("family,case_id", MATRIX, ids=[f"{f}-{c}" for f, c in MATRIX])
def test_idempotent_produce_and_group_consume(secure, kt, request, tmp_path, family, case_id):
    case = sk.CASES[case_id]
    harness = request.getfixturevalue("java_harness") if family == "java" else None
    if family == "kcat":
        kt.require_exe("kcat")
    sec = sk.security_for(case, secure.pki, secure.users)
    client = sk.adapter(family, sec, kt, tmp_path, harness)
    bootstrap = secure.bootstrap(case.listener)
    topic = kt.topic_name(f"sec-{family}", case_id)
    sk.create_topic(secure.plaintext, topic)
    msgs = sk.make_records(kt, f"{family}-{case_id}")
    expected = kt.by_partition(msgs)

    acks = client.produce(bootstrap, topic, msgs, idempotent=True)
    if acks is not None:
        acked: dict[int, list[int]] = {}
        for m, (p, off) in zip(msgs, acks):
            assert p == m.partition, f"{m.key!r} acknowledged on partition {p}, sent to {m.partition}"
            acked.setdefault(p, []).append(off)
        assert acked == {p: list(range(len(v))) for p, v in expected.items()}, \
            f"acknowledged offsets are not dense from 0 in send order: {acked}"

    group = f"sec-{family}-{case_id}-{uuid.uuid4().hex[:8]}"
    recs = client.consume_group(bootstrap, topic, group, len(msgs))
    kt.assert_records_match(msgs, recs, check_timestamps=client.sets_timestamps)

    # the producer really was idempotent: the broker keeps its sequence per partition
    producers = _idempotent_producers(secure.plaintext, topic, sorted(expected))
    for p, msgs_p in expected.items():
        states = producers[p]
        assert len(states) == 1 and states[0][0] >= 0, f"partition {p}: producers {states} (one idempotent expected)"
        assert states[0][1] == len(msgs_p) - 1, f"partition {p}: last sequence {states[0][1]} != {len(msgs_p) - 1}"
    # and the group member committed what it read
    committed = sk.committed_offsets(secure.plaintext, group, topic, sorted(expected))
    assert committed == {p: len(v) for p, v in expected.items()}, f"group {group} committed {committed}"


def test_zz_broker_log_holds_no_password(secure, kbroker):
    """After every client of the module authenticated: no password, keystore or key password of the
    run in the broker's stderr (secrets reach the broker through a --config file, not its argv)."""
    log = kbroker.stderr_path.read_text(errors="replace")
    leaked = [s for s in secure.passwords if s in log]
    assert not leaked, f"the broker's stderr holds {len(leaked)} of the {len(secure.passwords)} passwords of the run"
