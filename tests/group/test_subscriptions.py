"""Tests for kbroker.group.subscriptions: KIP-848 topic regex subscriptions (RE2 syntax, whole-name
matches as Kafka's `Pattern.matcher(topic).matches()`, INVALID_REGULAR_EXPRESSION for what RE2/J
refuses, linear time whatever the pattern)."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.errors import ErrorCode
from kbroker.group.subscriptions import (
    MAX_REGEX_LENGTH,
    InvalidRegularExpressionError,
    TopicRegex,
    compile_regex,
    resolve_regex,
    resolve_regexes,
    validate_regex,
)

settings.register_profile(
    "kbroker-subscriptions", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
PROPERTY = settings(settings.get_profile("kbroker-subscriptions"))

TOPICS = ["orders", "orders-v2", "orders-eu", "reorders", "payments", "__consumer_offsets",
          "__transaction_state", "a.b", "axb"]


@pytest.mark.parametrize("pattern", [
    "orders", "orders-.*", ".*", "", "(?i)ORDERS", "orders-(eu|us)", "[a-z]+", r"\w+\.\w+", r"\d{1,3}",
    "a{1000}", "(?P<name>x)", "(?<name>x)", r"\Qa.b\E", r"\Q\C\E", r"\pL+", "[[:alpha:]]+", "x*?", "(?s).",
    r"\Aorders\z", r"\bx\b", "(?U)a+",
])
def test_valid_patterns(pattern: str) -> None:
    assert validate_regex(pattern) is None
    assert compile_regex(pattern).pattern == pattern


@pytest.mark.parametrize("pattern, detail", [
    (r"(a)\1", r"invalid escape sequence: \1"),
    ("(?=x)", "invalid perl operator: (?="),
    ("(?!x)", "invalid perl operator: (?!"),
    ("(?<=x)y", "invalid"),
    ("a++", "bad repetition operator: ++"),
    ("a**", "bad repetition operator: **"),
    ("[", "missing ]: ["),
    ("(", "missing ): ("),
    (")", "unexpected ): )"),
    ("a{1001}", "invalid repetition size: {1001}"),
    (r"\Z", r"invalid escape sequence: \Z"),
    (r"\C", r"invalid escape sequence: \C"),
    (r"x\Cy", r"invalid escape sequence: \C"),
    ("(?#comment)", "invalid"),
    ("*", "no argument for repetition operator: *"),
])
def test_invalid_patterns(pattern: str, detail: str) -> None:
    error = validate_regex(pattern)
    assert isinstance(error, InvalidRegularExpressionError)
    assert error.code == ErrorCode.invalid_regular_expression
    assert str(error).startswith(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: ")
    assert detail in str(error)
    with pytest.raises(InvalidRegularExpressionError):
        compile_regex(pattern)
    with pytest.raises(InvalidRegularExpressionError):
        resolve_regex(pattern, TOPICS)


def test_pattern_length_is_bounded() -> None:
    assert MAX_REGEX_LENGTH == 1024
    assert validate_regex("a" * MAX_REGEX_LENGTH) is None
    error = validate_regex("a" * (MAX_REGEX_LENGTH + 1))
    assert error is not None and error.code == ErrorCode.invalid_regular_expression
    assert "longer than 1024 characters" in str(error)
    assert len(str(error)) < 200  # the pattern is not echoed whole
    assert validate_regex("a" * 10, max_length=9) is not None
    assert validate_regex("a" * 2000, max_length=4096) is None


def test_whole_name_matches() -> None:
    assert resolve_regex("orders", TOPICS) == {"orders"}
    assert resolve_regex("orders-.*", TOPICS) == {"orders-v2", "orders-eu"}
    assert resolve_regex("orders.*", TOPICS) == {"orders", "orders-v2", "orders-eu"}
    assert resolve_regex(".*orders.*", TOPICS) == {"orders", "orders-v2", "orders-eu", "reorders"}
    assert resolve_regex("a.b", TOPICS) == {"a.b", "axb"}
    assert resolve_regex(r"a\.b", TOPICS) == {"a.b"}
    assert resolve_regex("(?i)ORDERS", TOPICS) == {"orders"}
    assert resolve_regex("orders|payments", TOPICS) == {"orders", "payments"}
    assert resolve_regex("", TOPICS) == frozenset()
    assert resolve_regex("nothing", []) == frozenset()
    regex = compile_regex("orders-.*")
    assert isinstance(regex, TopicRegex)
    assert regex.matches("orders-x") and not regex.matches("xorders-x") and not regex.matches("orders")
    assert resolve_regex(regex, TOPICS) == {"orders-v2", "orders-eu"}


def test_internal_topics_match_as_in_kafka_unless_excluded() -> None:
    """Kafka's coordinator matches the regex against every topic, internal ones included."""
    assert resolve_regex(".*", TOPICS) == set(TOPICS)
    assert resolve_regex("__.*", TOPICS) == {"__consumer_offsets", "__transaction_state"}
    internal = {"__consumer_offsets", "__transaction_state", "__delayed_messages"}
    assert resolve_regex(".*", TOPICS, exclude=internal) == set(TOPICS) - internal


def test_resolve_many_patterns() -> None:
    resolved = resolve_regexes(["orders-.*", "(", "pay.*", "orders-.*"], TOPICS)
    assert resolved == {"orders-.*": {"orders-v2", "orders-eu"}, "(": frozenset(), "pay.*": {"payments"}}
    assert resolve_regexes([".*"], TOPICS, exclude={"__consumer_offsets"})[".*"] == set(TOPICS) - {
        "__consumer_offsets"}
    assert resolve_regexes([], TOPICS) == {}


def test_catastrophic_patterns_take_linear_time() -> None:
    """Patterns that make a backtracking engine run for ages: RE2 answers each in linear time."""
    names = [("a" * 248) + "!" for _ in range(2000)] + ["x" * 249 for _ in range(2000)]
    patterns = ["(a*)*b", "(a|aa)+", "(a|a)*b", "(x+x+)+y", "(.*a){20}", "((a+)+)+c"]
    start = time.perf_counter()
    for pattern in patterns:
        assert resolve_regex(pattern, names) == frozenset()
    elapsed = time.perf_counter() - start
    print(f"{len(patterns)} catastrophic patterns x {len(names)} topics of 249 chars: {elapsed * 1000:.0f} ms")
    assert elapsed < 10.0  # measured ~0.1 s; Python's re would not finish


# RE2 and Python's re agree on whole-name matching for the syntax both share: a differential test

ALPHABET = "ab1-_."
atoms = st.sampled_from(["a", "b", "1", "-", "_", r"\.", ".", "[ab]", "[^a]", r"\d", "[0-9]", r"\w"])


def _compose(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, children).map("".join),
        st.tuples(children, children).map(lambda pair: f"(?:{pair[0]}|{pair[1]})"),
        children.map(lambda c: f"({c})"),
    )


def _quantified(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(inner.map(lambda c: f"(?:{c})*"), inner.map(lambda c: f"(?:{c})+"),
                     inner.map(lambda c: f"(?:{c})?"), inner.map(lambda c: f"(?:{c}){{1,3}}"))


# quantifiers never over a quantified group: Python's re (the reference) backtracks exponentially on
# nested quantifiers, and a test example must not run for minutes (RE2 is linear either way)
patterns = st.recursive(st.one_of(atoms, _quantified(st.recursive(atoms, _compose, max_leaves=4))),
                        _compose, max_leaves=6)
topic_names = st.text(alphabet=ALPHABET, min_size=1, max_size=10)
# the differential test's names: short, so an alternation of overlapping branches under one
# quantifier stays cheap for the backtracking reference (8 ways per character: 8**7 steps at most)
short_names = st.text(alphabet=ALPHABET, min_size=1, max_size=7)


@PROPERTY
@given(patterns, st.lists(short_names, max_size=20))
def test_matches_agree_with_full_match_semantics(pattern: str, topics: list[str]) -> None:
    assert validate_regex(pattern) is None
    expected = frozenset(t for t in topics if re.fullmatch(pattern, t) is not None)
    assert resolve_regex(pattern, topics) == expected
    assert resolve_regexes([pattern], topics) == {pattern: expected}


@PROPERTY
@given(topic_names, st.lists(topic_names, max_size=20))
def test_quoted_name_matches_only_itself(name: str, topics: list[str]) -> None:
    assert resolve_regex(rf"\Q{name}\E", topics + [name]) == {name}
    assert resolve_regex(re.escape(name) + ".*", topics) == {t for t in topics if t.startswith(name)}


@PROPERTY
@given(st.text(max_size=40))
def test_any_text_is_either_accepted_or_refused_with_the_kafka_error(pattern: str) -> None:
    error = validate_regex(pattern)
    if error is None:
        resolve_regex(pattern, ["x", "orders"])
    else:
        assert error.code == ErrorCode.invalid_regular_expression
