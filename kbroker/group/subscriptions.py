"""Regex topic subscriptions of KIP-848 consumer groups (ConsumerGroupHeartbeat v1+'s
SubscribedTopicRegex), validated and resolved as Kafka 4's group coordinator does, in bounded time.

Syntax: RE2's (https://github.com/google/re2/wiki/Syntax), the syntax of RE2/J
(`com.google.re2j.Pattern`), which Kafka compiles these patterns with. Evaluated by Google's RE2
(`google-re2`, module `re2`), whose matching takes time linear in the topic name whatever the
pattern: no backtracking, so no catastrophic pattern.
    Accepted: literals and escapes (\\n, \\x{..}, \\Q...\\E), `.`, classes ([a-z], [^...], \\d \\w \\s
    and negations, [[:alpha:]] POSIX classes, \\pL \\p{Greek} Unicode classes), alternation `|`,
    groups ( ), (?:...), named (?P<name>...) and (?<name>...), repetition * + ? {n} {n,} {n,m}
    (n, m <= 1000) and their lazy forms, anchors ^ $ \\A \\z \\b \\B, flags (?i) (?m) (?s) (?U).
    Refused (INVALID_REGULAR_EXPRESSION, as RE2/J refuses them): backreferences (\\1), lookaround
    ((?=, (?!, (?<=, (?<!), possessive quantifiers, atomic groups, \\Z, comments (?#...); also
    \\C (any byte), which RE2 has and RE2/J does not. A pattern RE2 cannot compile within its memory
    budget (`MAX_PROGRAM_BYTES`) is refused too, where RE2/J would accept it.

Matching is Kafka's `Pattern.matcher(topic).matches()`: the whole topic name, so `orders-.*` names
every topic starting with `orders-`, and `orders` names only `orders`.

Internal topics: Kafka 4's coordinator (GroupMetadataManager.refreshRegularExpressions) matches the
regex against every topic of the metadata image, internal ones included, then drops the topics the
member may not DESCRIBE; it has no exclude-internal rule (the classic protocol's
exclude.internal.topics is a client-side setting). `resolve_regex` does the same by default; the
caller may pass `exclude=` (e.g. the broker's internal topics) to leave some out.

Kafka sets no length limit on the pattern; kbroker refuses patterns longer than `MAX_REGEX_LENGTH`
characters with INVALID_REGULAR_EXPRESSION, so a heartbeat cannot make the coordinator compile
arbitrarily large programs.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from typing import Any

import re2

from kbroker.errors import ErrorCode, KafkaError

__all__ = [
    "MAX_PROGRAM_BYTES",
    "MAX_REGEX_LENGTH",
    "InvalidRegularExpressionError",
    "TopicRegex",
    "compile_regex",
    "resolve_regex",
    "resolve_regexes",
    "validate_regex",
]

MAX_REGEX_LENGTH = 1024
"""The longest SubscribedTopicRegex accepted, in characters (Kafka has no limit)."""

MAX_PROGRAM_BYTES = 8 << 20
"""RE2's memory budget for one compiled pattern (RE2's default); beyond it the pattern is invalid."""


class InvalidRegularExpressionError(KafkaError):
    """Kafka error INVALID_REGULAR_EXPRESSION (128): a SubscribedTopicRegex that does not compile."""

    code = ErrorCode.invalid_regular_expression


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every syntax error on stderr
    options.max_mem = MAX_PROGRAM_BYTES
    return options


_OPTIONS = _options()


@dataclass(frozen=True, slots=True)
class TopicRegex:
    """A compiled subscription pattern; `matches` is a whole-name match."""

    pattern: str
    _compiled: Any = field(repr=False, compare=False)

    def matches(self, topic: str) -> bool:
        return self._compiled.fullmatch(topic) is not None


def _invalid(pattern: str, description: str) -> InvalidRegularExpressionError:
    # Kafka's wording (Utils.throwIfRegularExpressionIsInvalid)
    return InvalidRegularExpressionError(
        f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}.")


def _re2j_only_refusal(pattern: str) -> str | None:
    """What RE2/J refuses that RE2 accepts: the \\C escape (outside \\Q...\\E)."""
    i, n = 0, len(pattern)
    while i < n:
        if pattern[i] != "\\":
            i += 1
            continue
        escaped = pattern[i + 1:i + 2]
        if escaped == "Q":
            end = pattern.find("\\E", i + 2)
            if end < 0:
                return None
            i = end + 2
            continue
        if escaped == "C":
            return "invalid escape sequence: \\C"
        i += 2
    return None


def compile_regex(pattern: str, *, max_length: int = MAX_REGEX_LENGTH) -> TopicRegex:
    """The compiled pattern, or InvalidRegularExpressionError (INVALID_REGULAR_EXPRESSION) for a
    pattern longer than `max_length` characters or not valid RE2/J syntax."""
    if len(pattern) > max_length:
        shown = pattern[:64] + "..."
        raise _invalid(shown, f"longer than {max_length} characters")
    refusal = _re2j_only_refusal(pattern)
    if refusal is not None:
        raise _invalid(pattern, refusal)
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else "invalid pattern"
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise _invalid(pattern, str(detail)) from None
    return TopicRegex(pattern, compiled)


def validate_regex(pattern: str, *, max_length: int = MAX_REGEX_LENGTH) -> InvalidRegularExpressionError | None:
    """None if `pattern` is an acceptable SubscribedTopicRegex, else the INVALID_REGULAR_EXPRESSION
    error to answer the heartbeat with (Kafka checks a regex when a member first brings it)."""
    try:
        compile_regex(pattern, max_length=max_length)
    except InvalidRegularExpressionError as exc:
        return exc
    return None


def resolve_regex(regex: str | TopicRegex, topics: Iterable[str], *,
                  exclude: Container[str] = frozenset()) -> frozenset[str]:
    """The topics, among `topics`, whose whole name matches `regex`, minus those in `exclude`.
    A pattern given as a string is compiled first (InvalidRegularExpressionError if it cannot be)."""
    compiled = compile_regex(regex) if isinstance(regex, str) else regex
    match = compiled._compiled.fullmatch
    return frozenset(t for t in topics if t not in exclude and match(t) is not None)


def resolve_regexes(patterns: Iterable[str], topics: Iterable[str], *,
                    exclude: Container[str] = frozenset()) -> dict[str, frozenset[str]]:
    """Every pattern's matching topics, scanning the topic list once (Kafka's
    refreshRegularExpressions). A pattern that does not compile resolves to no topic, as Kafka logs
    and ignores one (patterns are validated when members bring them)."""
    compiled: list[TopicRegex] = []
    result: dict[str, set[str]] = {}
    for pattern in patterns:
        if pattern in result:
            continue
        result[pattern] = set()
        try:
            compiled.append(compile_regex(pattern))
        except InvalidRegularExpressionError:
            pass
    for topic in topics:
        if topic in exclude:
            continue
        for regex in compiled:
            if regex._compiled.fullmatch(topic) is not None:
                result[regex.pattern].add(topic)
    return {pattern: frozenset(found) for pattern, found in result.items()}
