"""`kbroker dev-cluster`'s ports (issue 22, item 7): the ports applications are configured for
(9092, 9093, ... and ZooKeeper's 2181) when free, a free port instead of one in use, and the host
the brokers advertise."""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from kbroker.cluster_runner import BrokerProcess, LocalCluster
from kbroker.dev_cluster import _check_ports, choose_ports, client_bootstrap, port_free


def test_wanted_ports_when_free_and_a_free_one_instead_of_one_in_use():
    free = itertools.count(40000).__next__
    assert choose_ports([9092, 9093, 9094, 2181], is_free=lambda p: True, pick_free=free) == (
        [9092, 9093, 9094, 2181], [])
    chosen, replaced = choose_ports([9092, 9093, 2181], is_free=lambda p: p != 9093, pick_free=free)
    assert chosen[0] == 9092 and chosen[2] == 2181 and chosen[1] >= 40000 and replaced == [1]
    # 0 asks for any free port (not a replacement); a port wanted twice is given once
    chosen, replaced = choose_ports([0, 2181, 2181], is_free=lambda p: True, pick_free=free)
    assert chosen[1] == 2181 and len(set(chosen)) == 3 and replaced == [2]
    # a free port that happens to be one wanted later is not handed out twice
    picks = iter([9093, 41000])
    assert choose_ports([9092, 9093], is_free=lambda p: p != 9092, pick_free=lambda: next(picks)) == (
        [41000, 9093], [0])


def test_port_free_sees_a_listener(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert not port_free(s.getsockname()[1])
    assert port_free(0)


def _args(**kw) -> argparse.Namespace:
    base = {"brokers": 3, "base_port": 9092, "zookeeper_port": None, "zookeeper": None, "advertise_host": None}
    return argparse.Namespace(**{**base, **kw})


def test_port_options_are_checked():
    assert _check_ports(_args()) is None
    assert _check_ports(_args(base_port=0, zookeeper_port=0, advertise_host="localhost")) is None
    assert "--base-port" in _check_ports(_args(base_port=65534))
    assert "--zookeeper-port" in _check_ports(_args(zookeeper_port=70000))
    assert "with --zookeeper it starts none" in _check_ports(_args(zookeeper="127.0.0.1:2181", zookeeper_port=2181))
    assert "--advertise-host" in _check_ports(_args(advertise_host="a b"))


def test_brokers_advertise_the_host_asked_for():
    broker = BrokerProcess(1, Path("/tmp/x"), "127.0.0.1:2181/kbroker", port=9092, advertised_host="localhost")
    command = broker.command()
    assert "listeners=PLAINTEXT://127.0.0.1:9092" in command
    assert "advertised.listeners=PLAINTEXT://localhost:9092" in command
    plain = BrokerProcess(1, Path("/tmp/x"), "zk", port=9092).command()
    assert not any(item.startswith("advertised.listeners=") for item in plain)
    cluster = LocalCluster(Path("/tmp/x"), 2, advertised_host="localhost")
    cluster.brokers = {1: broker, 2: BrokerProcess(2, Path("/tmp/y"), "zk", port=9093)}
    assert client_bootstrap(cluster) == "localhost:9092,localhost:9093"
