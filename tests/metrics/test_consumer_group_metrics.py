"""The consumer-protocol (KIP-848) group series against fake coordinators: Kafka's broker-wide
rebalance count, kbroker's per-group rebalances, members, epoch and assignment epoch lag, only for
the consumer-protocol groups coordinated here; kafka_consumergroup_members counts their members."""

from __future__ import annotations

from types import SimpleNamespace as NS

from prometheus_client.parser import text_string_to_metric_families

from kbroker.metrics.collector import assignment_epoch_lag, build_registry, render
from kbroker.metrics.stats import BrokerStats


def _member(epoch):
    return NS(current=NS(member_epoch=epoch))


def _consumer_group(epoch, assignment_epoch, *member_epochs, deleted=False):
    state = NS(deleted=deleted, epoch=epoch, assignment_epoch=assignment_epoch,
               members={f"m{i}": _member(e) for i, e in enumerate(member_epochs)})
    return NS(members={}, offsets={}, consumer=state)


def _scrape(coordinator) -> dict[tuple[str, tuple], float]:
    rm = NS(partitions={}, delayed_produces=0, delayed_fetches=0)
    broker = NS(replica_manager=rm, group_coordinator=coordinator, cluster=False, controller=None)
    body = render(build_registry(broker, BrokerStats(), lambda: 0, process=False)).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


def test_assignment_epoch_lag():
    assert assignment_epoch_lag(_consumer_group(5, 5, 5, 5).consumer) == 0  # Stable
    assert assignment_epoch_lag(_consumer_group(6, 5, 5, 5).consumer) == 1  # the target is one epoch behind
    assert assignment_epoch_lag(_consumer_group(5, 5, 4, 5, 3).consumer) == 2  # two members still reconciling
    assert assignment_epoch_lag(_consumer_group(7, 5, 4).consumer) == 3
    assert assignment_epoch_lag(_consumer_group(3, 3).consumer) == 0  # Empty


def test_per_group_series_and_kafkas_rebalance_count():
    groups = {"billing": _consumer_group(4, 3, 3, 2), "idle": _consumer_group(2, 2),
              "gone": _consumer_group(9, 9, deleted=True),
              "classic": NS(members={"c1": None, "c2": None}, offsets={}, consumer=None)}
    coordinator = NS(groups=groups, consumer_rebalances={"billing": 4, "gone": 9}, consumer_rebalances_total=15)
    got = _scrape(coordinator)

    def series(name, group):
        return got.get((name, (("group", group),)))

    assert got[("kafka_server_group_coordinator_metrics_consumer_group_rebalance_count_total", ())] == 15
    assert series("kbroker_consumer_group_rebalances_total", "billing") == 4
    assert series("kbroker_consumer_group_rebalances_total", "idle") == 0  # loaded from the log: none seen here
    assert series("kbroker_consumer_group_members", "billing") == 2
    assert series("kbroker_consumer_group_epoch", "billing") == 4
    assert series("kbroker_consumer_group_assignment_epoch_lag", "billing") == 1 + 1  # the target one behind, one member behind it
    assert series("kbroker_consumer_group_assignment_epoch_lag", "idle") == 0
    for name in ("kbroker_consumer_group_rebalances_total", "kbroker_consumer_group_members",
                 "kbroker_consumer_group_epoch", "kbroker_consumer_group_assignment_epoch_lag"):
        assert series(name, "gone") is None and series(name, "classic") is None
    members = {g: got[("kafka_consumergroup_members", (("consumergroup", g),))]
               for g in ("billing", "classic", "idle")}
    assert members == {"billing": 2, "classic": 2, "idle": 0}


def test_a_coordinator_without_consumer_groups():
    got = _scrape(NS(groups={}))
    assert got[("kafka_server_group_coordinator_metrics_consumer_group_rebalance_count_total", ())] == 0
    assert not [k for k in got if k[0].startswith("kbroker_consumer_group")]
