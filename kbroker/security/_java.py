"""The few Java library behaviours Kafka's security code leans on, reproduced so our messages and
tokens come out byte for byte as Kafka's do: `String.hashCode` and a `HashMap`'s iteration order
(which orders SCRAM extensions in the auth message and claims in an unsecured JWT),
`Double.toString`, `String.split` with a literal separator, `String.trim`, `List.toString`, and
`Integer`/`Long.parseLong` with their NumberFormatException wording.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from decimal import Decimal

__all__ = [
    "INT_MAX",
    "LONG_MAX",
    "LONG_MIN",
    "double_str",
    "hashmap_order",
    "is_blank",
    "list_str",
    "parse_int",
    "parse_long",
    "round_half_up",
    "split",
    "string_hash",
    "trim",
]

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


def string_hash(s: str) -> int:
    """Java's String.hashCode over the UTF-16 code units, as a signed 32-bit int."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def hashmap_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a java.util.HashMap the keys were put into, in this order (duplicates
    keep their first position, as a put of an existing key does). Buckets ascend; within a bucket the
    insertion order holds (resizing splits buckets preserving it). Tree bins (8+ keys in one bucket of
    a 64+ table) are not modelled."""
    unique = list(dict.fromkeys(keys))
    capacity = 16
    while len(unique) > capacity * 3 // 4:
        capacity *= 2
    index = {k: i for i, k in enumerate(unique)}
    return sorted(unique, key=lambda k: (_spread(string_hash(k)) & (capacity - 1), index[k]))


def double_str(x: float) -> str:
    """Java's Double.toString (JDK 19+: the shortest decimal that round-trips, which is Python's repr
    digits), in Java's layout: plain between 10^-3 and 10^7, else d.dddE<n>."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    ax = abs(x)
    t = Decimal(repr(ax)).as_tuple()
    assert isinstance(t.exponent, int)
    all_digits = "".join(map(str, t.digits))
    exponent = len(all_digits) + t.exponent - 1  # power of ten of the leading digit
    digits = all_digits.lstrip("0")
    exponent -= len(all_digits) - len(digits)
    digits = digits.rstrip("0") or "0"
    if 1e-3 <= ax < 1e7:
        if exponent >= 0:
            whole = digits[:exponent + 1].ljust(exponent + 1, "0")
            frac = digits[exponent + 1:] or "0"
        else:
            whole, frac = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def split(s: str, separator: str) -> list[str]:
    """Java's String.split(separator) for a literal separator: no match gives [s]; trailing empty
    strings are removed (so a string of separators only gives [])."""
    if separator not in s:
        return [s]
    parts = s.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


_TRIMMED = "".join(chr(c) for c in range(0x21))


def trim(s: str) -> str:
    """Java's String.trim: strips code points up to U+0020, not Unicode whitespace."""
    return s.strip(_TRIMMED)


def is_blank(s: str | None) -> bool:
    """Kafka's Utils.isBlank: null, or empty once trimmed."""
    return s is None or trim(s) == ""


def list_str(items: Iterable[object]) -> str:
    """Java's AbstractCollection.toString: [a, b]."""
    return "[" + ", ".join(str(i) for i in items) + "]"


def _parse(text: str, low: int, high: int) -> int:
    if not _JAVA_INTEGER.fullmatch(text):
        raise ValueError(f'For input string: "{text}"')
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f'For input string: "{text}"')
    return value


def parse_int(text: str) -> int:
    """Integer.parseInt; ValueError carrying NumberFormatException's message."""
    return _parse(text, INT_MIN, INT_MAX)


def parse_long(text: str) -> int:
    """Long.parseLong; ValueError carrying NumberFormatException's message."""
    return _parse(text, LONG_MIN, LONG_MAX)


def round_half_up(x: float) -> int:
    """Math.round(double): the closest long, ties up; NaN is 0, out of range saturates."""
    if math.isnan(x):
        return 0
    if x >= LONG_MAX:
        return LONG_MAX
    if x <= LONG_MIN:
        return LONG_MIN
    whole = math.floor(x)
    return whole + 1 if x - whole >= 0.5 else whole
