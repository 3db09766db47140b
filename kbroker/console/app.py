"""The console's web application: Starlette routes, Jinja templates (autoescaped: record contents
are untrusted) and htmx polling for live pages.

Every page `/X` has its live part at `/_live/X`, the fragment the page polls every `refresh`
seconds and swaps in; a failed request shows as an error box in that place, so a broker going away
is visible and the page recovers when it is back. Changes (create a topic, reset a group's
offsets or a share group's start offsets) are POSTed forms that first answer with a confirmation page; only the confirmed form
acts. POSTs from another site are refused (Origin / Sec-Fetch-Site), form bodies are bounded
(forms.py).

The pages act as one principal: the command config's, or with `--login` the session's (login.py,
sessions.py: each session has its own backend). A request the brokers refuse for authorization is
a refusal naming the principal, the action, the resource and the missing operation (refusals.py):
HTTP 403 for a change (nothing changed) or a page, in place in a live fragment. Forms the
principal may not use are not offered (access.py asks the authorized operations); the broker still
judges each request. `/acls` is the Access page (DescribeAcls).

Charts (inline SVG drawn by charts.py) show what the sampler (samples.py) recorded: a group's
lag on its page and in the groups list, a topic's messages/s on its page. The sampler runs in the
application's lifespan with the console's own backend, one round every --refresh seconds (at
least 1); with --login there is no such backend, and no charts.

With a schema registry (`--schema-registry-url`, registry.py) the message browser decodes keys
and values in Confluent's wire format, and `/schemas` lists the subjects, `/schemas/SUBJECT` shows
one (its versions, a version's schema, its compatibility level and mode); the registry is asked
with the console's own credentials, whoever is logged in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable
from urllib.parse import quote, urlencode

import anyio
import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from kbroker.admin.client import AdminClient, AdminError, KafkaErrorResponse
from kbroker.admin.schemas_cmd import RegistryErrorResponse, RegistryUnavailable
from kbroker.admin.reset import STRATEGIES, PlanError, ResetSpec
from kbroker.admin.share_groups import RESET_STRATEGIES as SHARE_RESET_STRATEGIES
from kbroker.console import browse, charts, refusals
from kbroker.console.backend import ConsoleBackend
from kbroker.console.forms import read_form
from kbroker.console.login import LoginGate, LoginRoutes, session_of
from kbroker.console.registry import ConsoleRegistry
from kbroker.console.samples import SampleStore, run_sampler, sample_period
from kbroker.console.sessions import SessionStore

HERE = Path(__file__).resolve().parent
USER_ERRORS = (AdminError, browse.QueryError, PlanError, RegistryUnavailable, RegistryErrorResponse)
SESSION_POOL_SIZE = 2  # each login's own admin clients


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


class Charts:
    """The charts a template asks for, drawn from the sample store (None: --login, nothing sampled)."""

    NOT_SAMPLED = Markup('<p class="muted chart-off">No charts with --login: the console samples lag and '
                         'messages/s only as a principal of its own (run it without --login).</p>')

    def __init__(self, store: SampleStore | None) -> None:
        self.store = store

    def _drawn(self, svg: str) -> Markup:
        assert self.store is not None
        if self.store.last_error is None:
            return Markup(svg)
        return Markup(svg) + Markup('<p class="muted sample-error">The last sampling round failed: {}</p>').format(
            self.store.last_error)

    def _options(self) -> dict[str, Any]:
        assert self.store is not None
        return {"window_s": self.store.window_s, "period_s": self.store.period_s}

    def group_lag(self, group_id: str) -> Markup:
        if self.store is None:
            return self.NOT_SAMPLED
        return self._drawn(charts.line_chart(self.store.lag(group_id), self.store.clock(),
                                             what=f"Lag of group {group_id}", unit="messages", chart_id="lag-chart",
                                             **self._options()))

    def group_sparkline(self, group_id: str) -> Markup:
        if self.store is None:
            return Markup("")
        return Markup(charts.sparkline(self.store.lag(group_id), self.store.clock(), what=f"Lag of group {group_id}",
                                       unit="messages", **self._options()))

    def topic_rate(self, topic: str) -> Markup:
        if self.store is None:
            return self.NOT_SAMPLED
        return self._drawn(charts.line_chart(self.store.rate(topic), self.store.clock(),
                                             what=f"Messages/s into topic {topic}", unit="msg/s",
                                             chart_id="rate-chart", **self._options()))


class ConsoleApp:
    """Routes bound to one cluster: one backend, or (`backend` None: --login) each session's."""

    def __init__(self, bootstrap: str, backend: ConsoleBackend | None, refresh_s: float,
                 samples: SampleStore | None = None, registry: ConsoleRegistry | None = None) -> None:
        self.bootstrap, self.backend = bootstrap, backend
        self.registry = registry
        self.refresh_s = refresh_s
        self.samples = samples
        self.charts = Charts(samples)
        self.templates = Jinja2Templates(env=_environment())

    def _backend(self, request: Request) -> ConsoleBackend:
        session = session_of(request)
        if session is not None:
            return session.resource  # type: ignore[return-value]
        assert self.backend is not None, "--login: LoginGate lets no request without a session through"
        return self.backend

    def _principal(self, request: Request) -> str:
        return self._backend(request).principal or "this principal"

    # -- rendering ---------------------------------------------------------------------------

    def render(self, request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        session = session_of(request)
        base = {"bootstrap": self.bootstrap, "refresh": self.refresh_s,
                "now": datetime.datetime.now().strftime("%H:%M:%S"), "error": None, "refusal": None,
                "user": session.principal if session is not None else None, "bare": False,
                "charts": self.charts, "registry_url": None if self.registry is None else self.registry.url}
        return self.templates.TemplateResponse(request, name, {**base, **context}, status_code=status)

    async def _live(self, request: Request, page: str, action: refusals.Action, call: Callable[..., Any],
                    *args: Any, **context: Any) -> Response:
        """A page, or at /_live/... its fragment, with `call(*args)` run in a worker thread; the
        brokers refusing it for authorization show as `action`'s refusal (a page: 403)."""
        fragment = request.url.path.startswith("/_live/")
        live_url = ("" if fragment else "/_live") + request.url.path
        if request.url.query:
            live_url += "?" + request.url.query
        started = time.monotonic()
        data = error = refusal = None
        try:
            data = await run_in_threadpool(call, *args)
        except KafkaErrorResponse as exc:
            refusal = self._refusal(request, exc, action)
            error = None if refusal is not None else str(exc)
        except USER_ERRORS as exc:
            error = str(exc)
        context = {**context, "data": data, "error": error, "refusal": refusal, "live_url": live_url,
                   "elapsed_ms": int((time.monotonic() - started) * 1000)}
        if fragment:
            return self.render(request, f"_{page}.html", context)
        status = 403 if refusal is not None else 200 if error is None else 502
        return self.render(request, f"{page}.html", context, status)

    def _refusal(self, request: Request, exc: KafkaErrorResponse, action: refusals.Action) -> refusals.Refusal | None:
        refusal = refusals.refusal_of(exc.code, self._principal(request), action)
        resource = getattr(exc, "resource", None)  # access.ResourceRefused: the one refused
        return refusal._replace(resource=resource) if refusal is not None and resource else refusal

    def _refused(self, request: Request, refusal: refusals.Refusal, nav: str) -> Response:
        """A change the brokers refused: 403, naming who may not do what."""
        return self.render(request, "refused.html", {"nav": nav, "refusal": refusal}, 403)

    # -- pages -------------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        return await self._live(request, "overview", refusals.read_cluster("show the cluster"),
                                self._backend(request).overview, nav="overview")

    async def topics(self, request: Request) -> Response:
        backend = self._backend(request)
        can_create = True
        if not request.url.path.startswith("/_live/"):
            can_create = await run_in_threadpool(backend.may_create_topics)
        return await self._live(request, "topics", refusals.read_cluster("list topics"), backend.topics,
                                nav="topics", can_create=can_create)

    async def topic(self, request: Request) -> Response:
        name = request.path_params["topic"]
        return await self._live(request, "topic", refusals.describe_topic(name), self._backend(request).topic, name,
                                nav="topics", name=name, done=request.query_params.get("done"))

    async def messages(self, request: Request) -> Response:
        name = request.path_params["topic"]
        params = dict(request.query_params)
        try:
            query = browse.parse_query(name, params)
        except browse.QueryError as exc:
            form = {k: params.get(k, "") for k in ("partition", "mode", "offset", "timestamp", "limit", "filter",
                                                    "format")}
            return self.render(request, "messages.html", {
                "nav": "topics", "name": name, "form": form, "data": None, "error": str(exc),
                "live_url": "", "elapsed_ms": 0, "modes": browse.MODES, "formats": browse.FORMATS}, 400)
        form = {"partition": "" if query.partition is None else str(query.partition), "mode": query.mode,
                "offset": params.get("offset", ""), "timestamp": params.get("timestamp", ""),
                "limit": str(query.limit), "filter": query.filter, "format": query.format}
        decode = None if self.registry is None else self.registry.decoder(name)
        return await self._live(request, "messages", refusals.browse_topic(name), self._backend(request).browse,
                                query, decode, nav="topics", name=name,
                                form=form, modes=browse.MODES, formats=browse.FORMATS,
                                next_url=f"/topics/{quote(name, safe='')}/messages?" + urlencode(
                                    {**{k: v for k, v in form.items() if k != "offset"}, "mode": "offset"})
                                + "&offset=")

    async def groups(self, request: Request) -> Response:
        return await self._live(request, "groups", refusals.read_cluster("list consumer groups"),
                                self._backend(request).groups, nav="groups")

    async def group(self, request: Request) -> Response:
        group_id = request.path_params["group"]
        backend = self._backend(request)
        can_reset = True
        if not request.url.path.startswith("/_live/"):
            can_reset = await run_in_threadpool(backend.may_reset_offsets, group_id)
        return await self._live(request, "group", refusals.describe_group(group_id), backend.group, group_id,
                                nav="groups", group_id=group_id, strategies=STRATEGIES,
                                done=request.query_params.get("done"), can_reset=can_reset)

    async def share_group(self, request: Request) -> Response:
        """A share group (KIP-932): state, epochs, members and their partitions, each partition's
        start offset and lag; its start offsets reset behind a confirmation, as a group's offsets."""
        group_id = request.path_params["group"]
        backend = self._backend(request)
        can_reset = True
        if not request.url.path.startswith("/_live/"):
            can_reset = await run_in_threadpool(backend.may_reset_offsets, group_id)
        return await self._live(request, "share_group", refusals.describe_group(group_id), backend.share_group,
                                group_id, nav="groups", group_id=group_id, strategies=SHARE_RESET_STRATEGIES,
                                done=request.query_params.get("done"), can_reset=can_reset)

    async def acls(self, request: Request) -> Response:
        """The Access page: the ACLs of `?principal=` (empty: everyone's); without it, with
        --login, the session's own."""
        asked = request.query_params.get("principal")
        session = session_of(request)
        if asked is None:
            asked = session.principal if session is not None else ""
        principal = asked.strip() or None
        if principal is not None and ":" not in principal:
            return self.render(request, "acls.html", {
                "nav": "acls", "principal_filter": asked, "data": None, "live_url": "", "elapsed_ms": 0,
                "error": "a principal is TYPE:NAME, e.g. User:alice"}, 400)
        return await self._live(request, "acls", refusals.describe_acls(), self._backend(request).acls, principal,
                                nav="acls", principal_filter=principal or "")

    async def schemas(self, request: Request) -> Response:
        """The Schemas page: the registry's subjects, each with its latest version, type and
        compatibility level (its own, or the global one, inherited)."""
        if self.registry is None:
            return self._no_registry(request)
        return await self._live(request, "schemas", refusals.read_cluster("list schemas"), self.registry.subjects,
                                nav="schemas")

    async def subject(self, request: Request) -> Response:
        """A subject: its versions (id, type), one version's schema (`?version=N`, else the
        latest), its compatibility level and mode."""
        if self.registry is None:
            return self._no_registry(request)
        subject = request.path_params["subject"]
        raw = (request.query_params.get("version") or "").strip()
        version = None
        if raw and raw != "latest":
            if not raw.isdigit() or not 1 <= int(raw) <= 2**31 - 1:
                return self.render(request, "subject.html", {
                    "nav": "schemas", "subject": subject, "data": None, "live_url": "", "elapsed_ms": 0,
                    "error": f"version must be a number from 1, or latest, not {raw[:40]!r}"}, 400)
            version = int(raw)
        return await self._live(request, "subject", refusals.read_cluster("show a schema"), self.registry.subject,
                                subject, version, nav="schemas", subject=subject)

    def _no_registry(self, request: Request) -> Response:
        return self.render(request, "schemas.html", {
            "nav": "schemas", "data": None, "live_url": "", "elapsed_ms": 0,
            "error": "No schema registry: start the console with --schema-registry-url URL "
                     "(or KBROKER_SCHEMA_REGISTRY_URL)"}, 404)

    # -- changes -----------------------------------------------------------------------------

    async def create_topic(self, request: Request) -> Response:
        form = await read_form(request)
        if isinstance(form, Response):
            return form
        fields = {k: v[-1] for k, v in form.items()}
        context = {"nav": "topics", "form": fields, "data": None}
        try:
            name, partitions, factor, configs = _topic_fields(fields)
            if fields.get("confirm") != "yes":
                return self.render(request, "confirm_create.html", {
                    **context, "name": name, "partitions": partitions, "replication_factor": factor,
                    "configs": configs})
            await run_in_threadpool(self._backend(request).create_topic, name, partitions, factor, configs)
        except KafkaErrorResponse as exc:
            refusal = self._refusal(request, exc, refusals.create_topic(fields.get("name", "").strip()))
            if refusal is not None:
                return self._refused(request, refusal, "topics")
            return self.render(request, "confirm_create.html", {**context, "error": str(exc), "name": fields.get(
                "name", ""), "partitions": None, "replication_factor": None, "configs": {}}, 400)
        except USER_ERRORS as exc:
            return self.render(request, "confirm_create.html", {**context, "error": str(exc), "name": fields.get(
                "name", ""), "partitions": None, "replication_factor": None, "configs": {}}, 400)
        return RedirectResponse(f"/topics/{quote(name, safe='')}?done=created", 303)

    async def reset_offsets(self, request: Request) -> Response:
        backend = self._backend(request)
        return await self._reset(request, "/groups", STRATEGIES, backend.plan_reset, backend.commit_offsets)

    async def reset_share_offsets(self, request: Request) -> Response:
        backend = self._backend(request)
        return await self._reset(request, "/share-groups", SHARE_RESET_STRATEGIES, backend.plan_share_reset,
                                 backend.alter_share_offsets)

    async def _reset(self, request: Request, base: str, strategies: tuple[str, ...],
                     plan_reset: Callable[..., Any], apply: Callable[..., Any]) -> Response:
        """A group's reset form: the plan on a confirmation page; the confirmed plan applied, then
        back to the group's page (`base`/GROUP)."""
        group_id = request.path_params["group"]
        form = await read_form(request)
        if isinstance(form, Response):
            return form
        fields = {k: v[-1] for k, v in form.items()}
        context = {"nav": "groups", "group_id": group_id, "form": fields, "plan": [], "warnings": [],
                   "base": base}
        topic = (fields.get("topic") or "").strip() or None
        action = refusals.plan_reset(group_id, topic)
        try:
            if fields.get("confirm") == "yes":
                offsets = _planned_offsets(form.get("planned", []))
                action = refusals.reset_offsets(group_id, {t for t, _p in offsets})
                await run_in_threadpool(apply, group_id, offsets)
                return RedirectResponse(f"{base}/{quote(group_id, safe='')}?done=reset", 303)
            spec = _reset_spec(fields, strategies)
            plan, warnings = await run_in_threadpool(plan_reset, group_id, topic, spec)
        except KafkaErrorResponse as exc:
            refusal = self._refusal(request, exc, action)
            if refusal is not None:
                return self._refused(request, refusal, "groups")
            return self.render(request, "confirm_reset.html", {**context, "error": str(exc)}, 400)
        except USER_ERRORS as exc:
            return self.render(request, "confirm_reset.html", {**context, "error": str(exc)}, 400)
        return self.render(request, "confirm_reset.html", {**context, "plan": plan, "warnings": warnings})


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


def _reset_spec(fields: dict[str, str], strategies: tuple[str, ...] = STRATEGIES) -> ResetSpec:
    strategy = fields.get("strategy") or ""
    if strategy not in strategies:
        raise PlanError(f"strategy must be one of {', '.join(strategies)}")
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


def create_app(bootstrap: str, refresh_s: float = 5.0, timeout: float = 10.0, security: Any = None,
               login: bool = False, idle_timeout_s: float = 1800.0, max_sessions: int = 100,
               registry: ConsoleRegistry | None = None) -> Starlette:
    """`security`: the brokers' TLS and SASL (kbroker.admin.security.ClientSecurity), or None.
    `login`: each browser session logs in with a SASL username and password, used in place of
    the ones `security` holds (its protocol, TLS and mechanism are kept). `registry`: a schema
    registry to decode messages with and show the Schemas pages of, or None."""
    AdminClient(bootstrap, timeout).close()  # the bootstrap list is checked now, not at the first page
    backend = None if login else ConsoleBackend(bootstrap, timeout, security)
    samples = None if backend is None else SampleStore(sample_period(refresh_s))
    console = ConsoleApp(bootstrap, backend, refresh_s, samples, registry)
    sessions = SessionStore(idle_timeout_s, max_sessions)
    middleware = []
    routes = []
    if login:
        def new_backend(username: str, password: str) -> ConsoleBackend:
            options = {**security.options, "username": username, "password": password}
            return ConsoleBackend(bootstrap, timeout, dataclasses.replace(security, options=options),
                                  SESSION_POOL_SIZE)

        gate = LoginRoutes(sessions, new_backend, console.render)
        routes += [Route("/login", gate.login_page), Route("/login", gate.login, methods=["POST"]),
                   Route("/logout", gate.logout, methods=["POST"])]
        middleware.append(Middleware(LoginGate, sessions=sessions))
    for prefix in ("", "/_live"):
        routes += [
            Route(prefix + "/", console.overview),
            Route(prefix + "/topics", console.topics),
            Route(prefix + "/topics/{topic}", console.topic),
            Route(prefix + "/topics/{topic}/messages", console.messages),
            Route(prefix + "/groups", console.groups),
            Route(prefix + "/groups/{group:path}", console.group),
            Route(prefix + "/share-groups/{group:path}", console.share_group),
            Route(prefix + "/acls", console.acls),
            Route(prefix + "/schemas", console.schemas),
            Route(prefix + "/schemas/{subject:path}", console.subject),
        ]
    routes += [
        Route("/topics", console.create_topic, methods=["POST"]),
        Route("/groups/{group:path}", console.reset_offsets, methods=["POST"]),
        Route("/share-groups/{group:path}", console.reset_share_offsets, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            async with anyio.create_task_group() as tasks:
                if backend is not None and samples is not None:
                    tasks.start_soon(run_sampler, samples, backend.sample)
                yield
                tasks.cancel_scope.cancel()
        finally:
            sessions.close()
            if backend is not None:
                backend.close()

    application = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    application.state.samples = samples  # what the charts draw (tests and debugging read it here)
    return application
