"""`kbroker console --login`: the web side of sessions (the store is sessions.py).

- `LoginGate` (ASGI middleware) lets through only /login and /static without a session: any other
  GET is redirected to /login (with where it was going), a POST or a `/_live/...` fragment is a 401
  (htmx follows its HX-Redirect to /login). A live session is put in the request's scope for the
  handlers (`session_of`).
- `LoginRoutes`: GET /login (the form), POST /login (the credentials are checked by authenticating
  to a broker with them; a refusal is the form again with "authentication failed", HTTP 401, and no
  session), POST /logout. Both POSTs are read by forms.py like every other form (cross-site check,
  bounded body). The cookie holds only the session's random token: HttpOnly, SameSite=Strict,
  path /, Secure when the console is reached over https.
"""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import urlencode

from kio.schema.errors import ErrorCode
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from kbroker.admin.client import AdminError, KafkaErrorResponse
from kbroker.console.forms import read_form
from kbroker.console.sessions import Session, SessionStore

__all__ = ["COOKIE", "LoginGate", "LoginRoutes", "safe_next", "session_of"]

COOKIE = "kbroker_console_session"
SCOPE_KEY = "kbroker.console.session"
OPEN_PATHS = ("/login",)
OPEN_PREFIXES = ("/static/",)
MAX_USERNAME_CHARS = 256
MAX_PASSWORD_CHARS = 1024
# what a broker answers to credentials it does not accept
_REFUSED_LOGIN = {ErrorCode.sasl_authentication_failed, ErrorCode.illegal_sasl_state}


def session_of(request: Request) -> Session | None:
    """The request's live session (put there by LoginGate); None without --login."""
    return request.scope.get(SCOPE_KEY)


def safe_next(target: str | None) -> str:
    """Where to go after logging in: a path of this console only (never another site's URL)."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")) or any(
            ord(c) < 0x20 for c in target):
        return "/"
    return target


class LoginGate:
    """Every request but the login page and static files needs a live session."""

    def __init__(self, app: Any, sessions: SessionStore) -> None:
        self.app, self.sessions = app, sessions

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        session = self.sessions.get(request.cookies.get(COOKIE))
        if session is None:
            await self._refuse(request)(scope, receive, send)
            return
        scope[SCOPE_KEY] = session
        await self.app(scope, receive, send)

    @staticmethod
    def _refuse(request: Request) -> Response:
        path = request.url.path
        if request.method in ("GET", "HEAD") and not path.startswith("/_live/"):
            target = path + ("?" + request.url.query if request.url.query else "")
            login = "/login" if target == "/" else "/login?" + urlencode({"next": target})
            return RedirectResponse(login, 303)
        response = PlainTextResponse("log in first: no session, or it expired", 401)
        response.headers["HX-Redirect"] = "/login"
        return response


class LoginRoutes:
    """The login form, its check, and logout. `new_backend(username, password)` makes the
    session's client pool (not yet connected); its `authenticate()` connects once with the
    credentials (KafkaErrorResponse when the broker refuses them); `render(request, template,
    context, status)` draws a page."""

    def __init__(self, sessions: SessionStore, new_backend: Callable[[str, str], Any],
                 render: Callable[..., Response]) -> None:
        self.sessions, self.new_backend, self.render = sessions, new_backend, render

    def _page(self, request: Request, error: str | None, status: int, username: str = "",
              next_url: str = "/") -> Response:
        return self.render(request, "login.html", {"error": error, "username": username, "next_url": next_url,
                                                   "bare": True, "nav": "login"}, status)

    async def login_page(self, request: Request) -> Response:
        return self._page(request, None, 200, next_url=safe_next(request.query_params.get("next")))

    async def login(self, request: Request) -> Response:
        form = await read_form(request)
        if isinstance(form, Response):
            return form
        fields = {k: v[-1] for k, v in form.items()}
        username, password = (fields.get("username") or "").strip(), fields.get("password") or ""
        next_url = safe_next(fields.get("next"))
        if not username or not password:
            return self._page(request, "a username and a password are needed", 400, username, next_url)
        if len(username) > MAX_USERNAME_CHARS or len(password) > MAX_PASSWORD_CHARS or any(
                ord(c) < 0x20 for c in username + password):
            return self._page(request, "authentication failed", 401, "", next_url)
        backend = self.new_backend(username, password)
        try:
            await run_in_threadpool(backend.authenticate)
        except KafkaErrorResponse as exc:
            backend.close()
            if exc.code in _REFUSED_LOGIN:
                return self._page(request, "authentication failed", 401, username, next_url)
            return self._page(request, f"the brokers did not let this login through: {exc}", 502, username, next_url)
        except AdminError as exc:
            backend.close()
            return self._page(request, f"no broker answered: {exc}", 502, username, next_url)
        except BaseException:
            backend.close()
            raise
        self.sessions.end(request.cookies.get(COOKIE))  # a browser logging in again gets a new token
        token, _session = self.sessions.create(username, backend)
        response = RedirectResponse(next_url, 303)
        response.set_cookie(COOKIE, token, path="/", httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    async def logout(self, request: Request) -> Response:
        form = await read_form(request)
        if isinstance(form, Response):
            return form
        self.sessions.end(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", 303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict",
                               secure=request.url.scheme == "https")
        return response
