"""Connection limits as Kafka's ConnectionQuotas counts them: max.connections, per listener, per IP
with overrides (Kafka's `host:count` format, hostnames resolved), the inter-broker listener exempt
from the broker-wide limit while other listeners exist."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.quota.connections import ConnectionLimits, normalize_ip, parse_overrides

INT_MAX = 2**31 - 1


def limits(max_connections=INT_MAX, per_ip=INT_MAX, overrides=None, listener_max=None,
           listeners=("PLAINTEXT",), inter_broker="PLAINTEXT", resolve=lambda h: [h]):
    out = ConnectionLimits()
    out.configure(max_connections=max_connections, per_ip=per_ip, overrides=overrides or {},
                  listener_max=listener_max or {}, listeners=listeners, inter_broker_listener=inter_broker,
                  resolve=resolve)
    return out


def test_overrides_parse_as_kafka_reads_them():
    assert parse_overrides("") == {}
    assert parse_overrides("127.0.0.1:200, localhost : 5,::1:7") == {"127.0.0.1": 200, "localhost": 5, "::1": 7}
    assert parse_overrides("fe80::1%eth0:3") == {"fe80::1%eth0": 3}
    with pytest.raises(ValueError, match="invalid addresses : a b"):
        parse_overrides("a b:5")
    with pytest.raises(ValueError, match='For input string: "x"'):
        parse_overrides("host:x")
    with pytest.raises(ValueError):
        parse_overrides("nocolon")


def test_per_ip_limit_and_overrides():
    c = limits(per_ip=2, overrides={"localhost": 3, "10.0.0.9": 0},
               resolve=lambda h: ["127.0.0.1", "::1"] if h == "localhost" else [h])
    assert [c.admit("PLAINTEXT", "10.0.0.1") for _ in range(3)][:2] == [None, None]
    assert "maximum of 2 connections" in c.admit("PLAINTEXT", "10.0.0.1")
    assert all(c.admit("PLAINTEXT", "127.0.0.1") is None for _ in range(3))
    assert c.admit("PLAINTEXT", "::ffff:127.0.0.1") is not None  # the same address, IPv4-mapped
    assert c.admit("PLAINTEXT", "10.0.0.9") is not None  # an override of 0 refuses every connection
    c.release("PLAINTEXT", "10.0.0.1")
    assert c.admit("PLAINTEXT", "10.0.0.1") is None


def test_listener_and_broker_limits_with_the_inter_broker_listener_exempt():
    c = limits(max_connections=2, listener_max={"CLIENT": 1}, listeners=("CLIENT", "INTERNAL"),
               inter_broker="INTERNAL")
    assert c.admit("CLIENT", "1.1.1.1") is None
    assert "listener CLIENT" in c.admit("CLIENT", "1.1.1.2")
    assert c.admit("INTERNAL", "2.2.2.2") is None
    assert c.admit("INTERNAL", "2.2.2.3") is None  # over max.connections, but the brokers' listener
    assert c.total == 3
    c.release("CLIENT", "1.1.1.1")
    assert "max.connections" in c.admit("CLIENT", "1.1.1.2")  # the broker is full
    single = limits(max_connections=1)
    assert single.admit("PLAINTEXT", "1.1.1.1") is None
    assert single.admit("PLAINTEXT", "1.1.1.2") is not None  # one listener: not exempt


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from(["a", "b"]), st.sampled_from(["1.1.1.1", "2.2.2.2", "::1"])),
                max_size=60), st.integers(0, 4), st.integers(0, 6))
def test_counts_never_pass_the_limits(ops, per_ip, total):
    c = limits(max_connections=total, per_ip=per_ip, listeners=("A", "B"), inter_broker=None)
    open_ = []
    for admit, listener, ip in ops:
        if admit:
            if c.admit(listener, ip) is None:
                open_.append((listener, ip))
        elif open_:
            c.release(*open_.pop())
        assert c.total == len(open_) <= total
        for address in {normalize_ip(i) for _, i in open_}:
            assert c.by_ip[address] == sum(1 for _, i in open_ if normalize_ip(i) == address) <= per_ip
