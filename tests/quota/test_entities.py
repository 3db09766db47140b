"""Quota entities and Kafka's precedence (ClientQuotaManager.DefaultQuotaCallback), checked against
the order Kafka documents, for any set of configured entities; the entity paths of /config."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.quota.entities import (
    DEFAULT,
    QuotaEntity,
    enabled_levels,
    entity_path,
    metric_tags,
    parse_entity_path,
    parse_quota_value,
    quota_limit,
)
from kbroker.zookeeper.znodes import sanitize

USERS = ["alice", "bob", "us er", "<default>"]
CLIENTS = ["app", "cli/ent", "x", "<default>"]


def precedence(quotas, user, client):
    """The ClientQuotaManager scaladoc's list, first match wins."""
    u, c = sanitize(user), sanitize(client)
    for entity in (QuotaEntity(u, c), QuotaEntity(u, DEFAULT), QuotaEntity(u, None), QuotaEntity(DEFAULT, c),
                   QuotaEntity(DEFAULT, DEFAULT), QuotaEntity(DEFAULT, None), QuotaEntity(None, c),
                   QuotaEntity(None, DEFAULT)):
        if entity in quotas:
            return quotas[entity]
    return None


user_part = st.sampled_from([None, DEFAULT] + [sanitize(u) for u in USERS])
client_part = st.sampled_from([None, DEFAULT] + [sanitize(c) for c in CLIENTS])
entities = st.tuples(user_part, client_part).filter(lambda e: e != (None, None)).map(lambda e: QuotaEntity(*e))


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(entities, st.integers(1, 10**9).map(float), max_size=10), st.sampled_from(USERS),
       st.sampled_from(CLIENTS))
def test_the_most_specific_configured_entity_applies(quotas, user, client):
    levels = enabled_levels(quotas)
    tags = metric_tags(levels, quotas, sanitize(user), sanitize(client))
    assert quota_limit(quotas, tags) == precedence(quotas, user, client)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(entities, st.integers(1, 10**9).map(float), max_size=10), st.sampled_from(USERS),
       st.sampled_from(CLIENTS), st.sampled_from(USERS), st.sampled_from(CLIENTS))
def test_requests_share_a_rate_exactly_when_the_chosen_entity_names_them_alike(quotas, u1, c1, u2, c2):
    levels = enabled_levels(quotas)
    t1 = metric_tags(levels, quotas, sanitize(u1), sanitize(c1))
    t2 = metric_tags(levels, quotas, sanitize(u2), sanitize(c2))
    if (u1, c1) == (u2, c2):
        assert t1 == t2
    if t1 == t2:  # sharing a rate means sharing its bound
        assert quota_limit(quotas, t1) == quota_limit(quotas, t2)


def test_a_user_quota_is_one_rate_for_all_the_users_client_ids():
    quotas = {QuotaEntity("alice", None): 100.0, QuotaEntity(None, "app"): 50.0}
    levels = enabled_levels(quotas)
    assert metric_tags(levels, quotas, "alice", "app") == ("alice", "")
    assert metric_tags(levels, quotas, "alice", "other") == ("alice", "")
    assert metric_tags(levels, quotas, "bob", "app") == ("", "app")  # client-id quota: shared by all users
    assert metric_tags(levels, quotas, "carol", "app") == ("", "app")


def test_an_empty_client_id_has_no_client_id_quota_as_in_kafka():
    quotas = {QuotaEntity(None, DEFAULT): 10.0}
    assert quota_limit(quotas, metric_tags(enabled_levels(quotas), quotas, "alice", "")) is None
    quotas = {QuotaEntity(DEFAULT, None): 10.0}
    assert quota_limit(quotas, metric_tags(enabled_levels(quotas), quotas, "alice", "")) == 10.0


def test_entity_paths_are_kafkas_znode_paths():
    cases = {
        QuotaEntity.of("alice"): "users/alice",
        QuotaEntity.of(client_id="app"): "clients/app",
        QuotaEntity.of("alice", "app"): "users/alice/clients/app",
        QuotaEntity.of(default_user=True): "users/<default>",
        QuotaEntity.of(default_user=True, default_client_id=True): "users/<default>/clients/<default>",
        QuotaEntity.of("CN=a b,O=x", "c/d"): "users/CN%3Da%20b%2CO%3Dx/clients/c%2Fd",
        QuotaEntity.of("<default>"): "users/%3Cdefault%3E",  # a user so named is not the default
    }
    for entity, path in cases.items():
        assert entity_path(entity) == path
        assert parse_entity_path(path) == entity
    assert QuotaEntity.of("CN=a b,O=x", "c/d").names() == ("CN=a b,O=x", "c/d")
    assert QuotaEntity.of(default_user=True).names() == (None, None)
    for bad in ("topics/x", "users", "users/a/clients", "users/a/groups/b", "clients/", ""):
        assert parse_entity_path(bad) is None


def test_stored_values_parse_as_kafka_reads_them():
    assert parse_quota_value("producer_byte_rate", "1048576") == 1048576.0
    assert parse_quota_value("producer_byte_rate", "1024.9") == 1024.0  # a long
    assert parse_quota_value("request_percentage", "12.5") == 12.5
    assert parse_quota_value("controller_mutation_rate", "1.0E1") == 10.0  # Java's Double.toString
    for bad in ("0", "-5", "abc", "nan"):
        try:
            parse_quota_value("request_percentage", bad)
        except ValueError:
            continue
        raise AssertionError(bad)
