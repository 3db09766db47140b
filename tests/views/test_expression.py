"""The view filter expression: parser, printer, matcher — property tests against a reference
evaluator written independently of the compiled matcher."""

import pytest
from hypothesis import assume, given, settings, strategies as st

from kbroker.views.expression import (
    MAX_DEPTH,
    And,
    FilterSyntaxError,
    HeaderEquals,
    Not,
    Or,
    Tags,
    compile_matcher,
    header_names,
    parse,
    to_text,
)

TAG_ALPHABET = "abcxyz-_.:/ \"\\é"
tag = st.text(TAG_ALPHABET, min_size=1, max_size=6).filter(lambda t: t == t.strip())
header_name = st.text("abhr-_.é \"", min_size=1, max_size=6)
value = st.text("ab \"\\é", max_size=5)


def expressions():
    leaves = st.one_of(
        st.builds(Tags, st.sampled_from(["any", "all"]), st.lists(tag, min_size=1, max_size=3).map(tuple)),
        st.builds(HeaderEquals, header_name, value, st.booleans()),
    )
    return st.recursive(leaves, lambda inner: st.one_of(
        st.builds(Not, inner), st.builds(And, inner, inner), st.builds(Or, inner, inner)), max_leaves=8)


@given(expressions())
def test_printing_then_parsing_gives_the_same_expression(expr):
    assert parse(to_text(expr)) == expr


# -- reference evaluator: on decoded strings, straight from the documented semantics -------------------

def reference(expr, headers: list[tuple[str, str | None]], tag_header: str) -> bool:
    if isinstance(expr, Tags):
        tags = set()
        for k, v in headers:
            if k == tag_header and v is not None:
                tags |= {t.strip() for t in v.split(",")} - {""}
        return bool(tags & set(expr.tags)) if expr.mode == "any" else set(expr.tags) <= tags
    if isinstance(expr, HeaderEquals):
        equal = any(k == expr.name and v == expr.value for k, v in headers)
        return equal != expr.negated
    if isinstance(expr, Not):
        return not reference(expr.operand, headers, tag_header)
    if isinstance(expr, And):
        return reference(expr.left, headers, tag_header) and reference(expr.right, headers, tag_header)
    return reference(expr.left, headers, tag_header) or reference(expr.right, headers, tag_header)


def as_walker_sees(headers, expr, tag_header):
    """What the batch walker hands the matcher: the wanted headers, by name, values as bytes."""
    wanted = {n.encode() for n in header_names(expr) | {tag_header}}
    out = {}
    for k, v in headers:
        if k.encode() in wanted:
            out.setdefault(k.encode(), []).append(None if v is None else v.encode())
    return out


record_headers = st.lists(st.tuples(st.sampled_from(["tags", "t2", "a", "b", "h", "é"]),
                                    st.one_of(st.none(), st.text("abcxyz, -é", max_size=12))), max_size=5)


@given(expressions(), record_headers, st.sampled_from(["tags", "t2"]))
def test_the_matcher_agrees_with_the_reference_evaluator(expr, headers, tag_header):
    matcher = compile_matcher(expr, tag_header)
    assert matcher(as_walker_sees(headers, expr, tag_header)) == reference(expr, headers, tag_header)


@settings(max_examples=500)
@given(st.text(max_size=60))
def test_garbage_never_crashes_the_parser(text):
    try:
        parse(text)
    except FilterSyntaxError as exc:
        assert "position" in str(exc)


@given(st.lists(st.sampled_from(["any(", "all(", ")", "(", ",", " and ", " or ", "not ", "a", '"x"',
                                 "header.", "header.h", "==", "!=", '"', "\\"]), max_size=30))
def test_token_soup_never_crashes_the_parser(parts):
    try:
        parse("".join(parts))
    except FilterSyntaxError:
        pass


def test_precedence_not_and_or():
    assert parse("any(a) or any(b) and not any(c)") == Or(Tags("any", ("a",)),
                                                          And(Tags("any", ("b",)), Not(Tags("any", ("c",)))))
    assert parse('(any(a) or all(b, "c d")) and header.region == "eu"') == And(
        Or(Tags("any", ("a",)), Tags("all", ("b", "c d"))), HeaderEquals("region", "eu"))
    assert parse('header."x y" != "1"') == HeaderEquals("x y", "1", True)


@pytest.mark.parametrize("text, message", [
    ("", "expected any(...)"),
    ("any(a", "expected ',' or ')'"),
    ("any()", "expected a tag"),
    ("header.region = \"eu\"", "unexpected character '='"),
    ("header.region == eu", "a quoted value"),
    ("any(a) any(b)", "expected 'and', 'or' or the end"),
    ('any(" a")', "can never match"),
    ('"unterminated', "unterminated string"),
    ("(" * (MAX_DEPTH + 1) + "any(a)" + ")" * (MAX_DEPTH + 1), "nested deeper"),
    ("any(a) and " * 1000 + "any(a)", "longer than"),
])
def test_bad_input_is_a_parse_error_saying_what_is_wrong(text, message):
    with pytest.raises(FilterSyntaxError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


def test_tags_are_comma_separated_trimmed_and_read_from_every_occurrence():
    m = compile_matcher(parse("all(eu, urgent)"), "tags")
    assert m({b"tags": [b" eu , x", b"urgent"]})
    assert not m({b"tags": [b"eu,x"]})
    assert not m({})
    assert compile_matcher(parse("not any(eu)"), "tags")({})
