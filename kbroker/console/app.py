"""The console's web application: Starlette routes, Jinja templates (autoescaped: record contents
are untrusted) and htmx polling for live pages.

Every page `/X` has its live part at `/_live/X`, the fragment the page polls every `refresh`
seconds and swaps in; a failed request shows as an error box in that place, so a broker going away
is visible and the page recovers when it is back. Changes (create a topic, reset a group's
offsets) are POSTed forms that first answer with a confirmation page; only the confirmed form
acts. POSTs from another site are refused (Origin / Sec-Fetch-Site), form bodies are bounded.
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from kbroker.admin.client import AdminError
from kbroker.admin.reset import STRATEGIES, PlanError, ResetSpec
from kbroker.console import browse
from kbroker.console.backend import ConsoleBackend

HERE = Path(__file__).resolve().parent
MAX_FORM_BYTES = 1024 * 1024
MAX_FORM_FIELDS = 20000
USER_ERRORS = (AdminError, browse.QueryError, PlanError)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["bytes"] = human_bytes
    env.filters["path"] = lambda s: quote(str(s), safe="")
    return env


class ConsoleApp:
    """Routes bound to one backend (one cluster)."""

    def __init__(self, backend: ConsoleBackend, refresh_s: float) -> None:
        self.backend = backend
        self.refresh_s = refresh_s
        self.templates = Jinja2Templates(env=_environment())

    # -- rendering ---------------------------------------------------------------------------

    def _render(self, request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        base = {"bootstrap": self.backend.bootstrap, "refresh": self.refresh_s,
                "now": datetime.datetime.now().strftime("%H:%M:%S"), "error": None}
        return self.templates.TemplateResponse(request, name, {**base, **context}, status_code=status)

    async def _live(self, request: Request, page: str, call: Callable[..., Any], *args: Any,
                    **context: Any) -> Response:
        """A page, or at /_live/... its fragment, with `call(*args)` run in a worker thread."""
        fragment = request.url.path.startswith("/_live/")
        live_url = ("" if fragment else "/_live") + request.url.path
        if request.url.query:
            live_url += "?" + request.url.query
        started = time.monotonic()
        try:
            data, error = await run_in_threadpool(call, *args), None
        except USER_ERRORS as exc:
            data, error = None, str(exc)
        context = {**context, "data": data, "error": error, "live_url": live_url,
                   "elapsed_ms": int((time.monotonic() - started) * 1000)}
        if fragment:
            return self._render(request, f"_{page}.html", context)
        return self._render(request, f"{page}.html", context, 200 if error is None else 502)

    # -- pages -------------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        return await self._live(request, "overview", self.backend.overview, nav="overview")

    async def topics(self, request: Request) -> Response:
        return await self._live(request, "topics", self.backend.topics, nav="topics")

    async def topic(self, request: Request) -> Response:
        name = request.path_params["topic"]
        return await self._live(request, "topic", self.backend.topic, name, nav="topics", name=name,
                                done=request.query_params.get("done"))

    async def messages(self, request: Request) -> Response:
        name = request.path_params["topic"]
        params = dict(request.query_params)
        try:
            query = browse.parse_query(name, params)
        except browse.QueryError as exc:
            form = {k: params.get(k, "") for k in ("partition", "mode", "offset", "timestamp", "limit", "filter",
                                                    "format")}
            return self._render(request, "messages.html", {
                "nav": "topics", "name": name, "form": form, "data": None, "error": str(exc),
                "live_url": "", "elapsed_ms": 0, "modes": browse.MODES, "formats": browse.FORMATS}, 400)
        form = {"partition": "" if query.partition is None else str(query.partition), "mode": query.mode,
                "offset": params.get("offset", ""), "timestamp": params.get("timestamp", ""),
                "limit": str(query.limit), "filter": query.filter, "format": query.format}
        return await self._live(request, "messages", self.backend.browse, query, nav="topics", name=name,
                                form=form, modes=browse.MODES, formats=browse.FORMATS,
                                next_url=f"/topics/{quote(name, safe='')}/messages?" + urlencode(
                                    {**{k: v for k, v in form.items() if k != "offset"}, "mode": "offset"})
                                + "&offset=")

    async def groups(self, request: Request) -> Response:
        return await self._live(request, "groups", self.backend.groups, nav="groups")

    async def group(self, request: Request) -> Response:
        group_id = request.path_params["group"]
        return await self._live(request, "group", self.backend.group, group_id, nav="groups", group_id=group_id,
                                strategies=STRATEGIES, done=request.query_params.get("done"))

    # -- changes -----------------------------------------------------------------------------

    async def _form(self, request: Request) -> dict[str, list[str]] | Response:
        if _cross_site(request):
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

    async def create_topic(self, request: Request) -> Response:
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        fields = {k: v[-1] for k, v in form.items()}
        context = {"nav": "topics", "form": fields, "data": None}
        try:
            name, partitions, factor, configs = _topic_fields(fields)
            if fields.get("confirm") != "yes":
                return self._render(request, "confirm_create.html", {
                    **context, "name": name, "partitions": partitions, "replication_factor": factor,
                    "configs": configs})
            await run_in_threadpool(self.backend.create_topic, name, partitions, factor, configs)
        except USER_ERRORS as exc:
            return self._render(request, "confirm_create.html", {**context, "error": str(exc), "name": fields.get(
                "name", ""), "partitions": None, "replication_factor": None, "configs": {}}, 400)
        return RedirectResponse(f"/topics/{quote(name, safe='')}?done=created", 303)

    async def reset_offsets(self, request: Request) -> Response:
        group_id = request.path_params["group"]
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        fields = {k: v[-1] for k, v in form.items()}
        context = {"nav": "groups", "group_id": group_id, "form": fields, "plan": [], "warnings": []}
        try:
            if fields.get("confirm") == "yes":
                offsets = _planned_offsets(form.get("planned", []))
                await run_in_threadpool(self.backend.commit_offsets, group_id, offsets)
                return RedirectResponse(f"/groups/{quote(group_id, safe='')}?done=reset", 303)
            topic = (fields.get("topic") or "").strip() or None
            spec = _reset_spec(fields)
            plan, warnings = await run_in_threadpool(self.backend.plan_reset, group_id, topic, spec)
        except USER_ERRORS as exc:
            return self._render(request, "confirm_reset.html", {**context, "error": str(exc)}, 400)
        return self._render(request, "confirm_reset.html", {**context, "plan": plan, "warnings": warnings})


def _cross_site(request: Request) -> bool:
    """A browser's POST from another origin: Sec-Fetch-Site says so, or Origin names another host."""
    if request.headers.get("sec-fetch-site") == "cross-site":
        return True
    origin = request.headers.get("origin")
    if origin is None:
        return False
    return origin == "null" or urlsplit(origin).netloc != request.headers.get("host")


def _optional_int(fields: dict[str, str], name: str, low: int, high: int) -> int | None:
    raw = (fields.get(name) or "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise AdminError(f"{name.replace('_', ' ')} must be a whole number from {low} to {high}")
    return int(raw)


def _topic_fields(fields: dict[str, str]) -> tuple[str, int | None, int | None, dict[str, str]]:
    name = (fields.get("name") or "").strip()
    if not name:
        raise AdminError("a topic needs a name")
    configs = {}
    for line in (fields.get("configs") or "").splitlines():
        if line.strip():
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise AdminError(f"config line {line[:60]!r} is not KEY=VALUE")
            configs[key.strip()] = value.strip()
    return (name, _optional_int(fields, "partitions", 1, 100000),
            _optional_int(fields, "replication_factor", 1, 32767), configs)


def _reset_spec(fields: dict[str, str]) -> ResetSpec:
    strategy = fields.get("strategy") or ""
    if strategy not in STRATEGIES:
        raise PlanError(f"strategy must be one of {', '.join(STRATEGIES)}")
    raw = (fields.get("value") or "").strip()
    if strategy in ("to-earliest", "to-latest"):
        return ResetSpec(strategy)
    if strategy == "to-datetime":
        return ResetSpec(strategy, browse.parse_timestamp(raw)) if raw else _missing(strategy)
    try:
        return ResetSpec(strategy, int(raw))
    except ValueError:
        raise PlanError(f"{strategy} needs a whole number") from None


def _missing(strategy: str) -> ResetSpec:
    raise PlanError(f"{strategy} needs a value")


def _planned_offsets(values: list[str]) -> dict[tuple[str, int], int]:
    """The confirmed plan, as the confirmation page listed it: TOPIC:PARTITION:OFFSET each."""
    out = {}
    for value in values:
        topic, _, rest = value.rpartition(":")
        topic, _, partition = topic.rpartition(":")
        if not topic or not partition.isdigit() or not rest.isdigit():
            raise PlanError(f"malformed planned offset {value[:80]!r}")
        out[(topic, int(partition))] = int(rest)
    if not out:
        raise PlanError("nothing to commit")
    return out


def create_app(bootstrap: str, refresh_s: float = 5.0, timeout: float = 10.0, security: Any = None) -> Starlette:
    """`security`: the brokers' TLS and SASL (kbroker.admin.security.ClientSecurity), or None."""
    backend = ConsoleBackend(bootstrap, timeout, security)
    console = ConsoleApp(backend, refresh_s)
    routes = []
    for prefix in ("", "/_live"):
        routes += [
            Route(prefix + "/", console.overview),
            Route(prefix + "/topics", console.topics),
            Route(prefix + "/topics/{topic}", console.topic),
            Route(prefix + "/topics/{topic}/messages", console.messages),
            Route(prefix + "/groups", console.groups),
            Route(prefix + "/groups/{group:path}", console.group),
        ]
    routes += [
        Route("/topics", console.create_topic, methods=["POST"]),
        Route("/groups/{group:path}", console.reset_offsets, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    async def lifespan(_app: Starlette):
        yield
        backend.close()

    return Starlette(routes=routes, lifespan=lifespan)
