"""The Java behaviours reproduced in kbroker.security._java; the expected values are what OpenJDK 17
prints for the same inputs."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.security import _java


def test_string_hash_matches_java():
    assert _java.string_hash("Aa") == _java.string_hash("BB") == 2112
    assert _java.string_hash("\u00e9t\u00e9\U0001F600") == 220632961
    assert _java.string_hash("") == 0


@pytest.mark.parametrize("keys,order", [
    (["tokenauth"], ["tokenauth"]),
    (["first", "second", "third"], ["third", "first", "second"]),
    (["unsecuredLoginStringClaim_sub", "unsecuredLoginExtension_traceId", "unsecuredLoginLifetimeSeconds",
      "unsecuredLoginListClaim_scope", "unsecuredLoginNumberClaim_n"],
     ["unsecuredLoginListClaim_scope", "unsecuredLoginExtension_traceId", "unsecuredLoginLifetimeSeconds",
      "unsecuredLoginNumberClaim_n", "unsecuredLoginStringClaim_sub"]),
    (["a", "b", "c", "Aa", "BB", "zz"] + [f"propName{i}" for i in range(10)] + ["x", "y", "z"],
     ["Aa", "BB", "zz", "a", "b", "propName1", "c", "propName0", "propName3", "propName2", "propName5",
      "propName4", "propName7", "propName6", "propName9", "propName8", "x", "y", "z"]),
])
def test_hashmap_order_matches_java(keys, order):
    assert _java.hashmap_order(keys) == order


def test_double_str_matches_java():
    values = [3600.0, 1729853600.123, 1.0E7, 9999999.999, 0.001, 0.0009, 123456789012.0, 1e-10, 1.5, 100.0, 1e21,
              1729850000.0]
    assert "|".join(_java.double_str(v) for v in values) == (
        "3600.0|1.729853600123E9|1.0E7|9999999.999|0.001|9.0E-4|1.23456789012E11|1.0E-10|1.5|100.0|1.0E21|1.72985E9")
    assert [_java.double_str(v) for v in (0.0, -0.0, math.inf, -math.inf, math.nan, -2.5)] == [
        "0.0", "-0.0", "Infinity", "-Infinity", "NaN", "-2.5"]


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_double_str_reads_back_as_the_same_double(x):
    assert float(_java.double_str(x)) == x


def test_split_drops_trailing_empty_strings():
    assert _java.split("a,b,,", ",") == ["a", "b"]
    assert _java.split(",a", ",") == ["", "a"]
    assert _java.split(",,", ",") == []
    assert _java.split("", ",") == [""]
    assert _java.split("abc", ",") == ["abc"]


def test_trim_and_blank_are_javas():
    assert _java.trim("\t x \x01") == "x"
    assert _java.trim("\u00a0x\u00a0") == "\u00a0x\u00a0"  # not whitespace to String.trim
    assert _java.is_blank(None) and _java.is_blank(" \n") and not _java.is_blank(" a ")


def test_parse_int_and_long():
    assert _java.parse_int("+12") == 12 and _java.parse_int("-3") == -3
    for bad in ("", " 1", "1_000", "2147483648", "0x10"):
        with pytest.raises(ValueError, match=f'For input string: "{bad}"'):
            _java.parse_int(bad)
    assert _java.parse_long("9223372036854775807") == 2**63 - 1
    with pytest.raises(ValueError):
        _java.parse_long("9223372036854775808")


def test_round_half_up_is_math_round():
    assert [_java.round_half_up(x) for x in (0.5, -0.5, 2.4, 0.49999999999999994, 1e300, math.nan)] == [
        1, 0, 2, 0, 2**63 - 1, 0]


def test_list_str():
    assert _java.list_str(["a", "b"]) == "[a, b]" and _java.list_str([]) == "[]"
