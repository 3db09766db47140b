"""The authorizer's counters on the metrics listener: KIP-608's names as the JMX exporter's common
config renders them, present only with an ACL authorizer configured."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from kbroker.metrics.collector import build_registry, render
from kbroker.metrics.stats import BrokerStats
from kbroker.security.audit import DecisionCounts


def _scrape(authorizer) -> dict[str, float]:
    broker = SimpleNamespace(replica_manager=SimpleNamespace(partitions={}, delayed_produces=0, delayed_fetches=0),
                             group_coordinator=SimpleNamespace(groups={}), cluster=False, controller=None,
                             authorizer=authorizer)
    body = render(build_registry(broker, BrokerStats(), lambda: 0, process=False)).decode()
    return {s.name: s.value for family in text_string_to_metric_families(body) for s in family.samples}


def test_allowed_denied_and_requests_are_counters_and_the_acls_a_gauge():
    counts = DecisionCounts()
    counts.allowed, counts.denied = 41, 7
    got = _scrape(SimpleNamespace(counts=counts, acl_count=10_000))
    assert got["kafka_server_authorizer_metrics_authorization_allowed_rate_total"] == 41
    assert got["kafka_server_authorizer_metrics_authorization_denied_rate_total"] == 7
    assert got["kafka_server_authorizer_metrics_authorization_request_rate_total"] == 48
    assert got["kafka_server_authorizer_metrics_acls_total_count"] == 10_000


def test_absent_without_an_authorizer():
    from kbroker.api.authorization import ALLOW_ALL

    for authorizer in (None, ALLOW_ALL):
        assert not any(name.startswith("kafka_server_authorizer") for name in _scrape(authorizer))
