"""The filter expression of a view (`view.filter`): parser, printer and compiled matcher. Pure.

Grammar (keywords lower case; `not` binds tighter than `and`, `and` tighter than `or`):

    expr   := and ("or" and)*
    and    := unary ("and" unary)*
    unary  := "not" unary | atom
    atom   := "(" expr ")"
            | "any" "(" tag ("," tag)* ")"       a record carrying at least one of the tags
            | "all" "(" tag ("," tag)* ")"       a record carrying every one of the tags
            | "header" "." name ("==" | "!=") string
    tag, name := word | string
    word   := [A-Za-z0-9_.:/-]+                  string := "..." with \\" and \\\\ escapes

A record's tags are the comma-separated, whitespace-trimmed values of its tag header (every
occurrence of it). `header.NAME == "v"` holds when some header NAME has exactly the bytes of "v";
`!=` is its negation. Matching compares bytes: no header value is ever decoded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Union

__all__ = ["FilterSyntaxError", "Tags", "HeaderEquals", "Not", "And", "Or", "Expr", "parse", "to_text",
           "header_names", "compile_matcher", "MAX_EXPRESSION_LENGTH", "MAX_DEPTH"]

MAX_EXPRESSION_LENGTH = 4096
MAX_DEPTH = 64  # nesting of parentheses and `not`: bounds the parser's recursion


class FilterSyntaxError(ValueError):
    """A `view.filter` that does not parse; the message says where and what was expected."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}")
        self.position = position


@dataclass(frozen=True)
class Tags:
    mode: str  # "any" or "all"
    tags: tuple[str, ...]


@dataclass(frozen=True)
class HeaderEquals:
    name: str
    value: str
    negated: bool = False


@dataclass(frozen=True)
class Not:
    operand: "Expr"


@dataclass(frozen=True)
class And:
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class Or:
    left: "Expr"
    right: "Expr"


Expr = Union[Tags, HeaderEquals, Not, And, Or]

_WORD = re.compile(r"[A-Za-z0-9_.:/\-]+")
_SPACE = re.compile(r"\s+")
_PUNCT = ("==", "!=", "(", ")", ",")
_HEADER_PREFIX = "header."


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "string", a punctuation symbol, or "end"
    text: str
    position: int


def _tokenize(text: str) -> list[_Token]:
    tokens = []
    pos = 0
    n = len(text)
    while pos < n:
        space = _SPACE.match(text, pos)
        if space:
            pos = space.end()
            continue
        word = _WORD.match(text, pos)
        if word:
            tokens.append(_Token("word", word.group(), pos))
            pos = word.end()
            continue
        if text[pos] == '"':
            value, end = _read_string(text, pos)
            tokens.append(_Token("string", value, pos))
            pos = end
            continue
        for symbol in _PUNCT:
            if text.startswith(symbol, pos):
                tokens.append(_Token(symbol, symbol, pos))
                pos += len(symbol)
                break
        else:
            raise FilterSyntaxError(f"unexpected character {text[pos]!r}", pos)
    tokens.append(_Token("end", "", n))
    return tokens


def _read_string(text: str, start: int) -> tuple[str, int]:
    out = []
    pos = start + 1
    while pos < len(text):
        c = text[pos]
        if c == '"':
            return "".join(out), pos + 1
        if c == "\\":
            if pos + 1 >= len(text) or text[pos + 1] not in '"\\':
                raise FilterSyntaxError('only \\" and \\\\ may be escaped in a string', pos)
            out.append(text[pos + 1])
            pos += 2
            continue
        out.append(c)
        pos += 1
    raise FilterSyntaxError("unterminated string", start)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.i]

    def _keyword(self, word: str) -> bool:
        t = self.token
        if t.kind == "word" and t.text == word:
            self.i += 1
            return True
        return False

    def _expect(self, kind: str, what: str) -> _Token:
        t = self.token
        if t.kind != kind:
            found = "the end" if t.kind == "end" else repr(t.text)
            raise FilterSyntaxError(f"expected {what}, found {found}", t.position)
        self.i += 1
        return t

    def _nested(self, position: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterSyntaxError(f"expression nested deeper than {MAX_DEPTH}", position)

    def parse(self) -> Expr:
        expr = self.expr()
        self._expect("end", "'and', 'or' or the end")
        return expr

    def expr(self) -> Expr:
        left = self.conjunction()
        while self._keyword("or"):
            left = Or(left, self.conjunction())
        return left

    def conjunction(self) -> Expr:
        left = self.unary()
        while self._keyword("and"):
            left = And(left, self.unary())
        return left

    def unary(self) -> Expr:
        t = self.token
        if self._keyword("not"):
            self._nested(t.position)
            operand = self.unary()
            self.depth -= 1
            return Not(operand)
        return self.atom()

    def atom(self) -> Expr:
        t = self.token
        if t.kind == "(":
            self.i += 1
            self._nested(t.position)
            inner = self.expr()
            self.depth -= 1
            self._expect(")", "')'")
            return inner
        if t.kind == "word" and t.text in ("any", "all"):
            self.i += 1
            self._expect("(", f"'(' after {t.text}")
            tags = [self._tag()]
            while self.token.kind == ",":
                self.i += 1
                tags.append(self._tag())
            self._expect(")", "',' or ')' after a tag")
            return Tags(t.text, tuple(tags))
        if t.kind == "word" and t.text.startswith(_HEADER_PREFIX):
            self.i += 1
            name = t.text[len(_HEADER_PREFIX):]
            if not name:
                name = self._expect("string", "a header name after 'header.'").text
            if not name:
                raise FilterSyntaxError("a header name cannot be empty", t.position)
            op = self.token
            if op.kind not in ("==", "!="):
                found = "the end" if op.kind == "end" else repr(op.text)
                raise FilterSyntaxError(f"expected '==' or '!=' after header.{name}, found {found}", op.position)
            self.i += 1
            value = self._expect("string", 'a quoted value (header values are strings: "...")').text
            return HeaderEquals(name, value, op.kind == "!=")
        found = "the end" if t.kind == "end" else repr(t.text)
        raise FilterSyntaxError(f"expected any(...), all(...), header.NAME, 'not' or '(', found {found}", t.position)

    def _tag(self) -> str:
        t = self.token
        if t.kind not in ("word", "string"):
            found = "the end" if t.kind == "end" else repr(t.text)
            raise FilterSyntaxError(f"expected a tag, found {found}", t.position)
        self.i += 1
        tag = t.text
        if not tag or tag != tag.strip() or "," in tag:
            raise FilterSyntaxError(f"tag {tag!r} can never match: tags are non-empty, trimmed and hold no comma",
                                    t.position)
        return tag


def parse(text: str) -> Expr:
    """The expression in `text`; FilterSyntaxError for anything else (never another exception)."""
    if not isinstance(text, str):
        raise FilterSyntaxError("the filter must be a string", 0)
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise FilterSyntaxError(f"the filter is longer than {MAX_EXPRESSION_LENGTH} characters", MAX_EXPRESSION_LENGTH)
    return _Parser(text).parse()


# -- printing ---------------------------------------------------------------------------------------

_KEYWORDS = frozenset({"and", "or", "not", "any", "all"})


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _word_or_string(value: str) -> str:
    if _WORD.fullmatch(value) and value not in _KEYWORDS and not value.startswith(_HEADER_PREFIX):
        return value
    return _quote(value)


def to_text(expr: Expr) -> str:
    """The canonical text of `expr` (binary operators parenthesised); `parse(to_text(e)) == e`."""
    if isinstance(expr, Tags):
        return f"{expr.mode}({', '.join(_word_or_string(t) for t in expr.tags)})"
    if isinstance(expr, HeaderEquals):
        name = expr.name if _WORD.fullmatch(expr.name) else None
        head = f"header.{name}" if name else f"header.{_quote(expr.name)}"
        return f"{head} {'!=' if expr.negated else '=='} {_quote(expr.value)}"
    if isinstance(expr, Not):
        return f"not {to_text(expr.operand)}"
    op = "and" if isinstance(expr, And) else "or"
    return f"({to_text(expr.left)} {op} {to_text(expr.right)})"


# -- matching -----------------------------------------------------------------------------------------

# a record's headers as the batch walker hands them over: header name (bytes) -> its values
RecordHeaders = dict[bytes, list[bytes | None]]
Matcher = Callable[[RecordHeaders], bool]


def header_names(expr: Expr) -> frozenset[str]:
    """The header names `expr` reads besides the tag header."""
    if isinstance(expr, HeaderEquals):
        return frozenset({expr.name})
    if isinstance(expr, Tags):
        return frozenset()
    if isinstance(expr, Not):
        return header_names(expr.operand)
    return header_names(expr.left) | header_names(expr.right)


def record_tags(values: list[bytes | None] | None) -> set[bytes]:
    """The tags in every occurrence of the tag header: comma-separated, trimmed, empty ones dropped."""
    tags: set[bytes] = set()
    for value in values or ():
        if value:
            tags.update(t.strip() for t in value.split(b","))
    tags.discard(b"")
    return tags


def compile_matcher(expr: Expr, tag_header: str) -> Matcher:
    """A function of a record's headers deciding whether `expr` holds for it."""
    tag_key = tag_header.encode()

    def build(e: Expr) -> Callable[[RecordHeaders, list], bool]:
        # `cache` holds the record's tag set once computed, so several tag tests share one split
        if isinstance(e, Tags):
            wanted = frozenset(t.encode() for t in e.tags)
            if e.mode == "any":
                return lambda headers, cache: not wanted.isdisjoint(_tags(headers, cache))
            return lambda headers, cache: wanted <= _tags(headers, cache)
        if isinstance(e, HeaderEquals):
            key, value, negated = e.name.encode(), e.value.encode(), e.negated
            return lambda headers, cache: (value in headers.get(key, ())) != negated
        if isinstance(e, Not):
            inner = build(e.operand)
            return lambda headers, cache: not inner(headers, cache)
        left, right = build(e.left), build(e.right)
        if isinstance(e, And):
            return lambda headers, cache: left(headers, cache) and right(headers, cache)
        return lambda headers, cache: left(headers, cache) or right(headers, cache)

    def _tags(headers: RecordHeaders, cache: list) -> set[bytes]:
        if not cache:
            cache.append(record_tags(headers.get(tag_key)))
        return cache[0]

    test = build(expr)
    return lambda headers: test(headers, [])
