"""ACLs through the stock admin clients' own ACL calls and `kbroker acls`, against a broker process
with `authorizer.class.name=kafka.security.authorizer.AclAuthorizer`, `super.users=User:admin` and
one SASL_PLAINTEXT listener (PLAIN users admin, alice and bob):

- confluent-kafka's AdminClient, kafka-python's KafkaAdminClient and the Java Admin (KbrokerHarness
  `admin create-acl | describe-acls | delete-acls`) create, describe (LITERAL, PREFIXED, ANY and
  MATCH filters) and delete ACLs, each seeing what the others made;
- `kbroker acls --add | --list | --remove` (with --producer / --consumer) as a subprocess with
  --command-config, seen by the stock clients;
- the refusal: alice, without ACLs, gets CLUSTER_AUTHORIZATION_FAILED for CreateAcls, DescribeAcls
  and DeleteAcls from every client; granted ALTER on the cluster she may manage ACLs, bob still not;
- bad input sent by kafka-python (which checks less than librdkafka): Kafka's INVALID_REQUEST;
- the ACLs survive a restart (kbroker-acls.json beside the metadata).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import securitykit as sk

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("kbroker")]

USERS = ("admin", "alice", "bob")


class Setup:
    def __init__(self, broker, passwords: dict[str, str], workdir: Path) -> None:
        self.broker, self.passwords, self.workdir = broker, passwords, workdir

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def command_config(self, user: str) -> Path:
        path = self.workdir / f"{user}.properties"
        if not path.exists():
            sk.write_properties(path, {
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f'{sk.PLAIN_LOGIN} required username="{user}" password="{self.passwords[user]}";'})
        return path


@pytest.fixture(scope="module")
def setup(kt, tmp_path_factory):
    if kt.EXTERNAL:
        pytest.skip("KBROKER_COMPAT_EXTERNAL: this module starts a broker of its own with an authorizer")
    workdir = tmp_path_factory.mktemp("acls-admin")
    passwords = {u: sk.secret(f"{u}-plain") for u in USERS}
    port = kt.free_port()
    overrides = {
        "listeners": f"SASL_PLAINTEXT://{sk.HOST}:{port}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    secrets = {"listener.name.sasl_plaintext.plain.sasl.jaas.config": sk.jaas_plain(passwords)}
    broker = sk.secure_broker(kt, workdir / "broker", overrides, secrets, port)
    gen = kt._running(broker)
    next(gen)
    try:
        yield Setup(broker, passwords, workdir)
    finally:
        try:
            next(gen)
        except StopIteration:
            pass


@pytest.fixture(scope="module")
def kbroker(setup):
    return setup.broker


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- the clients -------------------------------------------------------------------------------------

def confluent(kt, setup, user: str):
    admin = kt.require_module("confluent_kafka.admin")
    return admin, admin.AdminClient({"bootstrap.servers": setup.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                                     "sasl.mechanism": "PLAIN", "sasl.username": user,
                                     "sasl.password": setup.passwords[user]})


def kafka_python(kt, setup, user: str):
    kt.require_module("kafka")
    admin = kt.require_module("kafka.admin")
    client = admin.KafkaAdminClient(bootstrap_servers=setup.bootstrap, security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="PLAIN", sasl_plain_username=user,
                                    sasl_plain_password=setup.passwords[user], request_timeout_ms=30000)
    return admin, client


def java(kt, setup, java_harness, user: str, *args: str) -> list[dict]:
    import os

    env = dict(os.environ, KBROKER_CLIENT_PROPERTIES=str(setup.command_config(user)))
    cp = subprocess.run(java_harness.argv("admin", setup.bootstrap, *args), capture_output=True, text=True,
                        timeout=120, env=env)
    assert cp.returncode == 0, f"java harness failed: {cp.stdout[-2000:]}\n{cp.stderr[-3000:]}"
    return [json.loads(line) for line in cp.stdout.splitlines() if line.startswith("{")]


def kbroker_acls(setup, user: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", "acls", "--bootstrap-server", setup.bootstrap,
                           "--command-config", str(setup.command_config(user)), *args],
                          capture_output=True, text=True, timeout=60, input=stdin)


def listed(setup, *args: str) -> set[tuple]:
    """`kbroker acls --list --output json` as the admin: (type, pattern, name, principal, host, op, permission)."""
    cp = kbroker_acls(setup, "admin", "--list", "--output", "json", *args)
    assert cp.returncode == 0, cp.stderr
    return {(r["resourceType"], r["patternType"], r["name"], r["principal"], r["host"], r["operation"],
             r["permissionType"]) for r in json.loads(cp.stdout)}


def _confluent_code(future) -> int:
    exc = future.exception(30)
    assert exc is not None, "expected an error"
    return exc.args[0].code()


# -- the refusal ---------------------------------------------------------------------------------------

def test_alice_without_acls_is_refused_by_every_client(kt, setup, java_harness):
    admin, client = confluent(kt, setup, "alice")
    from confluent_kafka import KafkaError

    binding = admin.AclBinding(admin.ResourceType.TOPIC, "refused", admin.ResourcePatternType.LITERAL, "User:alice",
                               "*", admin.AclOperation.READ, admin.AclPermissionType.ALLOW)
    assert _confluent_code(client.create_acls([binding])[binding]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    any_filter = admin.AclBindingFilter(admin.ResourceType.ANY, None, admin.ResourcePatternType.ANY, None, None,
                                        admin.AclOperation.ANY, admin.AclPermissionType.ANY)
    # librdkafka drops DescribeAcls's top-level error (rd_kafka_DescribeAclsResponse_parse returns no
    # error whatever the code): a refusal reaches confluent-kafka as an empty list, against Kafka too
    assert client.describe_acls(any_filter).result(30) == []
    assert _confluent_code(client.delete_acls([any_filter])[any_filter]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    kadmin, kp = kafka_python(kt, setup, "alice")
    kafka_errors = kt.require_module("kafka.errors")
    try:
        acl = kadmin.ACL("User:alice", "*", kadmin.ACLOperation.READ, kadmin.ACLPermissionType.ALLOW,
                         kadmin.ResourcePattern(kadmin.ResourceType.TOPIC, "refused"))
        result = kp.create_acls([acl])
        assert result["succeeded"] == [] and result["failed"] == [kafka_errors.ClusterAuthorizationFailedError]
        with pytest.raises(kafka_errors.ClusterAuthorizationFailedError):
            kp.describe_acls(kadmin.ACLFilter(None, None, kadmin.ACLOperation.ANY, kadmin.ACLPermissionType.ANY,
                                              kadmin.ResourcePatternFilter(kadmin.ResourceType.ANY, None,
                                                                           kadmin.ACLResourcePatternType.ANY)))
    finally:
        kp.close()

    assert java(kt, setup, java_harness, "alice", "create-acl", "TOPIC", "refused", "LITERAL", "User:alice", "*",
                "READ", "ALLOW")[-1]["error"] == "ClusterAuthorizationException"
    assert java(kt, setup, java_harness, "alice", "describe-acls", "ANY", "-", "ANY")[-1]["error"] == \
        "ClusterAuthorizationException"

    cp = kbroker_acls(setup, "alice", "--add", "--allow-principal", "User:alice", "--operation", "Read",
                      "--topic", "refused")
    assert cp.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in cp.stderr
    assert not any(name == "refused" for _t, _p, name, *_ in listed(setup))


# -- each client family manages ACLs, the others see them ----------------------------------------------

def test_confluent_kafka_create_describe_delete(kt, setup, java_harness):
    admin, client = confluent(kt, setup, "admin")
    topic, prefix = unique("conf-orders"), unique("conf-team") + "-"
    T, L, P = admin.ResourceType, admin.ResourcePatternType.LITERAL, admin.ResourcePatternType.PREFIXED
    Op, Perm = admin.AclOperation, admin.AclPermissionType
    bindings = [admin.AclBinding(T.TOPIC, topic, L, "User:alice", "*", Op.READ, Perm.ALLOW),
                admin.AclBinding(T.TOPIC, prefix, P, "User:alice", "*", Op.WRITE, Perm.ALLOW),
                admin.AclBinding(T.TOPIC, topic, L, "User:bob", "10.9.9.9", Op.ALL, Perm.DENY),
                admin.AclBinding(T.GROUP, prefix, P, "User:*", "*", Op.READ, Perm.ALLOW)]
    for b, future in client.create_acls(bindings).items():
        assert future.result(30) is None, b
    # MATCH: the literal name and the prefixes that apply to it
    match = admin.AclBindingFilter(T.TOPIC, prefix + "x", admin.ResourcePatternType.MATCH, None, None, Op.ANY, Perm.ANY)
    assert {(b.name, b.resource_pattern_type) for b in client.describe_acls(match).result(30)} == {(prefix, P)}
    exact = admin.AclBindingFilter(T.TOPIC, topic, admin.ResourcePatternType.ANY, None, None, Op.ANY, Perm.ANY)
    assert {(b.principal, b.host, b.operation, b.permission_type) for b in client.describe_acls(exact).result(30)} == {
        ("User:alice", "*", Op.READ, Perm.ALLOW), ("User:bob", "10.9.9.9", Op.ALL, Perm.DENY)}
    # the Java client and `kbroker acls` see the same
    seen = java(kt, setup, java_harness, "admin", "describe-acls", "TOPIC", topic, "ANY")
    assert {(r["principal"], r["operation"]) for r in seen if "principal" in r} == {("User:alice", "READ"),
                                                                                   ("User:bob", "ALL")}
    assert ("GROUP", "PREFIXED", prefix, "User:*", "*", "READ", "ALLOW") in listed(setup)
    # delete: each binding under the first filter matching it
    any_of_topic = admin.AclBindingFilter(T.TOPIC, topic, L, None, None, Op.ANY, Perm.ANY)
    deleted = client.delete_acls([exact, any_of_topic, match])
    assert len(deleted[exact].result(30)) == 2 and deleted[any_of_topic].result(30) == []
    assert [(b.name, b.operation) for b in deleted[match].result(30)] == [(prefix, Op.WRITE)]
    assert not any(name in (topic, prefix) and rtype == "TOPIC" for rtype, _p, name, *_ in listed(setup))


def test_kafka_python_create_describe_delete(kt, setup, java_harness):
    kadmin, client = kafka_python(kt, setup, "admin")
    topic, txn = unique("kp-orders"), unique("kp-tx")
    try:
        acls = [kadmin.ACL("User:alice", "*", kadmin.ACLOperation.WRITE, kadmin.ACLPermissionType.ALLOW,
                           kadmin.ResourcePattern(kadmin.ResourceType.TOPIC, topic)),
                kadmin.ACL("User:alice", "*", kadmin.ACLOperation.DESCRIBE, kadmin.ACLPermissionType.ALLOW,
                           kadmin.ResourcePattern(kadmin.ResourceType.TRANSACTIONAL_ID, txn,
                                                  kadmin.ACLResourcePatternType.PREFIXED)),
                kadmin.ACL("User:alice", "*", kadmin.ACLOperation.IDEMPOTENT_WRITE, kadmin.ACLPermissionType.ALLOW,
                           kadmin.ResourcePattern(kadmin.ResourceType.CLUSTER, "kafka-cluster"))]
        result = client.create_acls(acls)
        assert result["failed"] == [] and len(result["succeeded"]) == 3
        found, _error = client.describe_acls(kadmin.ACLFilter(
            "User:alice", None, kadmin.ACLOperation.ANY, kadmin.ACLPermissionType.ANY,
            kadmin.ResourcePatternFilter(kadmin.ResourceType.ANY, None, kadmin.ACLResourcePatternType.ANY)))
        names = {(a.resource_pattern.resource_type.name, a.resource_pattern.resource_name) for a in found}
        assert {("TOPIC", topic), ("TRANSACTIONAL_ID", txn), ("CLUSTER", "kafka-cluster")} <= names
        # confluent-kafka sees the transactional id's prefixed ACL
        admin, cclient = confluent(kt, setup, "admin")
        f = admin.AclBindingFilter(admin.ResourceType.TRANSACTIONAL_ID, txn + "-1", admin.ResourcePatternType.MATCH,
                                   None, None, admin.AclOperation.ANY, admin.AclPermissionType.ANY)
        assert [(b.name, b.operation) for b in cclient.describe_acls(f).result(30)] == [(txn, admin.AclOperation.DESCRIBE)]
        # delete with kafka-python; the Java client no longer finds them
        deleted = client.delete_acls([kadmin.ACLFilter(
            None, None, kadmin.ACLOperation.ANY, kadmin.ACLPermissionType.ANY,
            kadmin.ResourcePatternFilter(kadmin.ResourceType.ANY, name, kadmin.ACLResourcePatternType.ANY))
            for name in (topic, txn)] + [kadmin.ACLFilter(
                "User:alice", "*", kadmin.ACLOperation.IDEMPOTENT_WRITE, kadmin.ACLPermissionType.ALLOW,
                kadmin.ResourcePatternFilter(kadmin.ResourceType.CLUSTER, "kafka-cluster",
                                             kadmin.ACLResourcePatternType.LITERAL))])
        assert [(len(matching), error.__name__) for _f, matching, error in deleted] == [(1, "NoError")] * 3
        assert [r for r in java(kt, setup, java_harness, "admin", "describe-acls", "ANY", "-", "ANY", "User:alice")
                if r.get("name") in (topic, txn)] == []
    finally:
        client.close()


def test_kafka_python_sends_bad_input_and_gets_kafkas_errors(kt, setup):
    kadmin, client = kafka_python(kt, setup, "admin")
    errors = kt.require_module("kafka.errors")
    try:
        pattern = kadmin.ResourcePattern(kadmin.ResourceType.TOPIC, unique("bad"))
        no_colon = kadmin.ACL("alice", "*", kadmin.ACLOperation.READ, kadmin.ACLPermissionType.ALLOW, pattern)
        match = kadmin.ACL("User:alice", "*", kadmin.ACLOperation.READ, kadmin.ACLPermissionType.ALLOW,
                           kadmin.ResourcePattern(kadmin.ResourceType.TOPIC, unique("bad")))
        match.resource_pattern.pattern_type = kadmin.ACLResourcePatternType.MATCH  # what a client must not send
        wrong_cluster = kadmin.ACL("User:alice", "*", kadmin.ACLOperation.ALTER, kadmin.ACLPermissionType.ALLOW,
                                   kadmin.ResourcePattern(kadmin.ResourceType.CLUSTER, "my-cluster"))
        result = client.create_acls([no_colon, match, wrong_cluster])
        assert result["succeeded"] == [] and result["failed"] == [errors.InvalidRequestError] * 3
        # an UNKNOWN element in a delete filter: refused per filter
        unknown = kadmin.ACLFilter(None, None, kadmin.ACLOperation.UNKNOWN, kadmin.ACLPermissionType.ANY,
                                   kadmin.ResourcePatternFilter(kadmin.ResourceType.TOPIC, None,
                                                                kadmin.ACLResourcePatternType.ANY))
        [(_f, matching, error)] = client.delete_acls([unknown])
        assert matching == [] and error is errors.InvalidRequestError
    finally:
        client.close()


def test_java_create_describe_delete(kt, setup, java_harness):
    topic, group = unique("java-orders"), unique("java-group")
    for args in (("TOPIC", topic, "LITERAL", "User:alice", "*", "READ", "ALLOW"),
                 ("TOPIC", "java-", "PREFIXED", "User:bob", "*", "DESCRIBE", "ALLOW"),
                 ("GROUP", group, "LITERAL", "User:alice", "*", "READ", "ALLOW"),
                 ("TOPIC", topic, "LITERAL", "User:alice", "10.1.1.1", "WRITE", "DENY")):
        assert java(kt, setup, java_harness, "admin", "create-acl", *args) == [{"call": "create-acl", "result": "ok"}]
    # a binding the broker refuses: the Java client's exception
    refused = java(kt, setup, java_harness, "admin", "create-acl", "CLUSTER", "not-kafka-cluster", "LITERAL",
                   "User:alice", "*", "ALTER", "ALLOW")
    assert refused[-1]["error"] == "InvalidRequestException"
    assert "kafka-cluster" in refused[-1]["message"]
    seen = java(kt, setup, java_harness, "admin", "describe-acls", "TOPIC", topic, "MATCH")
    assert {(r["name"], r["patternType"], r["principal"], r["operation"]) for r in seen if "name" in r} == {
        (topic, "LITERAL", "User:alice", "READ"), ("java-", "PREFIXED", "User:bob", "DESCRIBE"),
        (topic, "LITERAL", "User:alice", "WRITE")}
    # kbroker acls and kafka-python see them
    assert ("GROUP", "LITERAL", group, "User:alice", "*", "READ", "ALLOW") in listed(setup, "--group", group)
    kadmin, kp = kafka_python(kt, setup, "admin")
    try:
        found, _ = kp.describe_acls(kadmin.ACLFilter(None, None, kadmin.ACLOperation.ANY, kadmin.ACLPermissionType.ANY,
                                                     kadmin.ResourcePatternFilter(kadmin.ResourceType.TOPIC, topic,
                                                                                  kadmin.ACLResourcePatternType.LITERAL)))
        assert {(a.operation.name, a.permission_type.name, a.host) for a in found} == {("READ", "ALLOW", "*"),
                                                                                       ("WRITE", "DENY", "10.1.1.1")}
    finally:
        kp.close()
    deleted = java(kt, setup, java_harness, "admin", "delete-acls", "TOPIC", topic, "LITERAL", "-", "ANY", "ANY",
                   "TOPIC", "java-", "PREFIXED", "User:bob", "DESCRIBE", "ALLOW", "GROUP", group, "ANY", "-", "ANY", "ANY")
    assert deleted[-1] == {"call": "delete-acls", "result": "ok"} and len(deleted) == 5
    assert [r for r in java(kt, setup, java_harness, "admin", "describe-acls", "TOPIC", topic, "MATCH")
            if "name" in r] == []


def test_kbroker_acls_command(kt, setup, java_harness):
    topic, group, txn = unique("cli-orders"), unique("cli-group"), unique("cli-tx")
    cp = kbroker_acls(setup, "admin", "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic,
                      "--transactional-id", txn, "--idempotent")
    assert cp.returncode == 0, cp.stderr
    assert f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`" in cp.stdout
    cp = kbroker_acls(setup, "admin", "--add", "--allow-principal", "User:bob", "--consumer", "--topic", topic,
                      "--group", group)
    assert cp.returncode == 0, cp.stderr
    assert {(p, op) for rtype, _pt, name, p, _h, op, _perm in listed(setup, "--topic", topic) if name == topic} == {
        ("User:alice", "WRITE"), ("User:alice", "DESCRIBE"), ("User:alice", "CREATE"),
        ("User:bob", "READ"), ("User:bob", "DESCRIBE")}
    assert ("CLUSTER", "LITERAL", "kafka-cluster", "User:alice", "*", "IDEMPOTENT_WRITE", "ALLOW") in listed(setup)
    # the stock clients see what the command made
    admin, client = confluent(kt, setup, "admin")
    f = admin.AclBindingFilter(admin.ResourceType.GROUP, group, admin.ResourcePatternType.LITERAL, "User:bob", None,
                               admin.AclOperation.ANY, admin.AclPermissionType.ANY)
    assert [b.operation for b in client.describe_acls(f).result(30)] == [admin.AclOperation.READ]
    seen = java(kt, setup, java_harness, "admin", "describe-acls", "TRANSACTIONAL_ID", txn, "LITERAL")
    assert {r["operation"] for r in seen if "name" in r} == {"WRITE", "DESCRIBE"}
    # text output as kafka-acls.sh prints it
    cp = kbroker_acls(setup, "admin", "--list", "--group", group)
    assert f"Current ACLs for resource `ResourcePattern(resourceType=GROUP, name={group}, patternType=LITERAL)`" in cp.stdout
    assert "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)" in cp.stdout
    # --remove asks first: "n" keeps everything, --force removes
    cp = kbroker_acls(setup, "admin", "--remove", "--topic", topic, stdin="n\n")
    assert cp.returncode == 0 and "Are you sure" in cp.stdout
    assert any(name == topic for _t, _p, name, *_ in listed(setup, "--topic", topic))
    cp = kbroker_acls(setup, "admin", "--remove", "--allow-principal", "User:alice", "--producer", "--topic", topic,
                      "--transactional-id", txn, "--idempotent", "--force")
    assert cp.returncode == 0, cp.stderr
    assert {p for _t, _pt, name, p, *_ in listed(setup, "--topic", topic) if name == topic} == {"User:bob"}
    cp = kbroker_acls(setup, "admin", "--remove", "--topic", topic, "--group", group, "--force")
    assert cp.returncode == 0, cp.stderr
    assert listed(setup, "--topic", topic, "--group", group) == set()
    # kafka-acls.sh's refusals of option combinations
    cp = kbroker_acls(setup, "admin", "--add", "--topic", topic)
    assert cp.returncode == 1 and "You must specify one of: --allow-principal, --deny-principal" in cp.stderr
    cp = kbroker_acls(setup, "admin", "--add", "--allow-principal", "User:a", "--operation", "Write", "--group", group)
    assert cp.returncode == 1 and "ResourceType GROUP only supports operations" in cp.stderr


def test_alice_granted_alter_on_the_cluster_manages_acls(kt, setup):
    cp = kbroker_acls(setup, "admin", "--add", "--allow-principal", "User:alice", "--operation", "Alter", "--cluster")
    assert cp.returncode == 0, cp.stderr
    try:
        admin, client = confluent(kt, setup, "alice")
        topic = unique("alice-made")
        b = admin.AclBinding(admin.ResourceType.TOPIC, topic, admin.ResourcePatternType.LITERAL, "User:bob", "*",
                             admin.AclOperation.READ, admin.AclPermissionType.ALLOW)
        assert client.create_acls([b])[b].result(30) is None
        f = admin.AclBindingFilter(admin.ResourceType.TOPIC, topic, admin.ResourcePatternType.ANY, None, None,
                                   admin.AclOperation.ANY, admin.AclPermissionType.ANY)
        assert len(client.describe_acls(f).result(30)) == 1  # ALTER implies DESCRIBE
        cp = kbroker_acls(setup, "bob", "--list")
        assert cp.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in cp.stderr
        assert len(client.delete_acls([f])[f].result(30)) == 1
    finally:
        cp = kbroker_acls(setup, "admin", "--remove", "--allow-principal", "User:alice", "--operation", "Alter",
                          "--cluster", "--force")
        assert cp.returncode == 0, cp.stderr


def test_acls_survive_a_restart(kt, setup):
    topic = unique("durable")
    cp = kbroker_acls(setup, "admin", "--add", "--deny-principal", "User:bob", "--operation", "Read",
                      "--topic", topic, "--resource-pattern-type", "prefixed")
    assert cp.returncode == 0, cp.stderr
    setup.broker.restart()
    assert ("TOPIC", "PREFIXED", topic, "User:bob", "*", "READ", "DENY") in listed(setup)
    stored = json.loads((setup.broker.data_dir / "kbroker-acls.json").read_text())
    assert any(r["name"] == topic and r["patternType"] == "PREFIXED" for r in stored["resources"])


# -- a three-broker ZooKeeper cluster ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def acl_cluster(kt, tmp_path_factory):
    import clusterkit as ck

    if kt.EXTERNAL:
        pytest.skip("KBROKER_COMPAT_EXTERNAL: this test starts a cluster of its own")
    c = ck.start_cluster(tmp_path_factory.mktemp("acl-cluster"), 3, overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"})
    yield c
    ck.stop_cluster(c)


def _seen_by_each_broker(cluster, name: str, running_only: bool = False) -> dict[int, set[tuple]]:
    from kbroker.admin.acls import describe_acls
    from kbroker.admin.client import AdminClient
    from kbroker.security.acl import AccessControlEntryFilter, AclBindingFilter, ResourcePatternFilter

    out = {}
    for broker_id, broker in cluster.brokers.items():
        if running_only and not broker.running:
            continue
        with AdminClient(broker.address, timeout=10) as admin:  # DescribeAcls answers from that broker's copy
            found = describe_acls(admin, AclBindingFilter(ResourcePatternFilter(name=name), AccessControlEntryFilter()))
        out[broker_id] = {(b.pattern.resource_type.name, b.pattern.pattern_type.name, b.entry.principal,
                           b.entry.operation.name) for b in found}
    return out


def test_cluster_every_broker_enforces_a_change_within_a_second_and_zookeeper_holds_kafkas_format(kt, acl_cluster):
    import time

    from kazoo.client import KazooClient

    import clusterkit as ck

    topic = unique("cl-orders")
    cli = [sys.executable, "-m", "kbroker", "acls", "--bootstrap-server"]
    added = subprocess.run(cli + [acl_cluster.brokers[2].address, "--add", "--allow-principal", "User:alice",
                                  "--operation", "Read", "--topic", topic, "--resource-pattern-type", "prefixed"],
                           capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    started = time.monotonic()
    expected = {("TOPIC", "PREFIXED", "User:alice", "READ")}
    ck.wait_for(lambda: all(v == expected for v in _seen_by_each_broker(acl_cluster, topic).values()), 5,
                "every broker to hold the new ACL")
    assert time.monotonic() - started < 1.5, "a notification took more than a second to reach every broker"

    zk = KazooClient(hosts=f"{acl_cluster.zookeeper.connect}/kbroker")
    zk.start(timeout=10)
    try:
        payload = json.loads(zk.get(f"/kafka-acl-extended/prefixed/Topic/{topic}")[0])
        assert payload == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                                   "operation": "Read", "host": "*"}]}
        changes = [json.loads(zk.get(f"/kafka-acl-extended-changes/{c}")[0])
                   for c in zk.get_children("/kafka-acl-extended-changes")]
        assert {"version": 1, "resourceType": "TOPIC", "name": topic, "patternType": "PREFIXED"} in changes
        # a literal ACL written the way Kafka's own AclAuthorizer (or a ZooKeeper tool) writes it
        zk.create(f"/kafka-acl/Group/{topic}", b'{"version":1,"acls":[{"principal":"User:bob","permissionType":'
                                               b'"Allow","operation":"Read","host":"*"}]}')
        zk.create("/kafka-acl-changes/acl_changes_", f"Group:{topic}".encode(), sequence=True)
        ck.wait_for(lambda: all(("GROUP", "LITERAL", "User:bob", "READ") in v
                                for v in _seen_by_each_broker(acl_cluster, topic).values()), 5,
                    "every broker to load the ACL Kafka's tools wrote")
    finally:
        zk.stop()
        zk.close()

    # removed through another broker: every broker forgets it; a restarted broker loads what is left
    removed = subprocess.run(cli + [acl_cluster.brokers[3].address, "--remove", "--topic", topic,
                                    "--resource-pattern-type", "prefixed", "--force"],
                             capture_output=True, text=True, timeout=60)
    assert removed.returncode == 0, removed.stderr
    ck.wait_for(lambda: all(v == {("GROUP", "LITERAL", "User:bob", "READ")}
                            for v in _seen_by_each_broker(acl_cluster, topic).values()), 5,
                "every broker to forget the removed ACL")
    broker = acl_cluster.brokers[1]
    broker.stop()
    broker.start()
    assert _seen_by_each_broker(acl_cluster, topic)[1] == {("GROUP", "LITERAL", "User:bob", "READ")}

    # the controller is SIGKILLed: the ACLs stay enforced by the others, a change made meanwhile
    # reaches every live broker within a second, and the old controller has the whole set when back
    controller = ck.controller_id(acl_cluster)
    acl_cluster.brokers[controller].kill()
    survivor = next(b for i, b in acl_cluster.brokers.items() if i != controller)
    ck.wait_for(lambda: ck.controller_id(acl_cluster, via=next(i for i in acl_cluster.brokers if i != controller))
                not in (controller, -1), 30, "a new controller")
    added = subprocess.run(cli + [survivor.address, "--add", "--allow-principal", "User:carol", "--operation",
                                  "Write", "--topic", topic], capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    both = {("GROUP", "LITERAL", "User:bob", "READ"), ("TOPIC", "LITERAL", "User:carol", "WRITE")}
    started = time.monotonic()
    ck.wait_for(lambda: all(v == both for v in _seen_by_each_broker(acl_cluster, topic, True).values()), 5,
                "every live broker to hold the ACL added after the controller died")
    assert time.monotonic() - started < 1.5
    acl_cluster.brokers[controller].start()
    ck.wait_for(lambda: _seen_by_each_broker(acl_cluster, topic)[controller] == both, 30,
                "the restarted controller to load every ACL")
