"""How the console reads a POSTed form, for every form alike (changes, login, logout): a POST from
another site is refused (Sec-Fetch-Site, or an Origin naming another host), the body is bounded in
bytes and fields, and a malformed one is a 400 — before any handler looks at it.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

__all__ = ["MAX_FORM_BYTES", "MAX_FORM_FIELDS", "cross_site", "read_form"]

MAX_FORM_BYTES = 1024 * 1024
MAX_FORM_FIELDS = 20000


def cross_site(request: Request) -> bool:
    """A browser's POST from another origin: Sec-Fetch-Site says so, or Origin names another host."""
    if request.headers.get("sec-fetch-site") == "cross-site":
        return True
    origin = request.headers.get("origin")
    if origin is None:
        return False
    return origin == "null" or urlsplit(origin).netloc != request.headers.get("host")


async def read_form(request: Request) -> dict[str, list[str]] | Response:
    """The form's fields (each name's values in order), or the response refusing it."""
    if cross_site(request):
        return PlainTextResponse("cross-site request refused", 403)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return PlainTextResponse("form too large", 413)
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError):
        return PlainTextResponse("malformed form", 400)
    form: dict[str, list[str]] = {}
    for key, value in pairs:
        form.setdefault(key, []).append(value)
    return form
