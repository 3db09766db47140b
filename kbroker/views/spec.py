"""What a filtered view is, from its topic configs: `view.source`, `view.filter`, `view.tags.header`.
Pure: validation of a CreateTopics request's configs and the compiled matcher of a view.

A view has no other configs: it follows its source's partition count and retention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from kbroker.errors import InvalidConfigError
from kbroker.views.expression import Expr, FilterSyntaxError, Matcher, compile_matcher, header_names, parse

VIEW_SOURCE = "view.source"
VIEW_FILTER = "view.filter"
VIEW_TAGS_HEADER = "view.tags.header"
DEFAULT_TAGS_HEADER = "tags"
VIEW_CONFIG_KEYS = (VIEW_FILTER, VIEW_SOURCE, VIEW_TAGS_HEADER)
MAX_HEADER_NAME_LENGTH = 255

CONFIG_DOCS = {
    VIEW_SOURCE: "The topic a filtered view reads; set only when the view is created.",
    VIEW_FILTER: "The view's filter expression over record tags and headers (docs/features.md).",
    VIEW_TAGS_HEADER: "The record header holding a record's comma-separated tags.",
}


def is_view_request(configs: Mapping[str, str | None]) -> bool:
    """A CreateTopics entry naming a source is a view (any view.* key makes it one, to be validated)."""
    return any(key.startswith("view.") for key in configs)


@dataclass(frozen=True)
class ViewSpec:
    source: str
    filter_text: str
    tags_header: str = DEFAULT_TAGS_HEADER
    expression: Expr = field(compare=False, repr=False, default=None)  # type: ignore[assignment]

    @property
    def configs(self) -> dict[str, str]:
        out = {VIEW_SOURCE: self.source, VIEW_FILTER: self.filter_text}
        if self.tags_header != DEFAULT_TAGS_HEADER:
            out[VIEW_TAGS_HEADER] = self.tags_header
        return out

    def matcher(self) -> Matcher:
        return compile_matcher(self.expression, self.tags_header)

    def wanted_headers(self) -> frozenset[bytes]:
        """The header names (bytes) a record walk must copy out for this view's filter."""
        return frozenset(n.encode() for n in header_names(self.expression) | {self.tags_header})


def view_spec(configs: Mapping[str, str | None]) -> ViewSpec:
    """The view these configs define; InvalidConfigError with a clear message otherwise."""
    unknown = sorted(k for k in configs if k not in VIEW_CONFIG_KEYS)
    if unknown:
        raise InvalidConfigError(
            f"A view takes only {', '.join(VIEW_CONFIG_KEYS)}; it follows its source's other configs "
            f"(partitions, retention), so {', '.join(unknown)} cannot be set on it")
    source = configs.get(VIEW_SOURCE)
    text = configs.get(VIEW_FILTER)
    if not source:
        raise InvalidConfigError(f"A view needs {VIEW_SOURCE}: the topic it filters")
    if text is None or not text.strip():
        raise InvalidConfigError(f"A view needs {VIEW_FILTER}: its filter expression, e.g. any(eu, urgent)")
    tags_header = configs.get(VIEW_TAGS_HEADER) or DEFAULT_TAGS_HEADER
    if len(tags_header) > MAX_HEADER_NAME_LENGTH:
        raise InvalidConfigError(f"{VIEW_TAGS_HEADER} is longer than {MAX_HEADER_NAME_LENGTH} characters")
    try:
        expression = parse(text)
    except FilterSyntaxError as exc:
        raise InvalidConfigError(f"Invalid {VIEW_FILTER} {text!r}: {exc}") from None
    return ViewSpec(source, text, tags_header, expression)
