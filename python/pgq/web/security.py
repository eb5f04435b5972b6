"""The dashboard's security that every request meets before a page: the allowed Host
(against DNS rebinding), HTTP Basic auth when a password is set, the security headers, and
the per-browser sessions whose tokens every action must carry (CSRF).

It renders no page and never touches the database; what an action checks before it runs
(read-only, Origin, the CSRF token) is site.Site.action's, with these sessions.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from . import hosts

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:;"
    " object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)


Next = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Config:
    dsn: str
    user: str = "admin"
    password: str | None = None
    read_only: bool = False
    # The address it listens on, and the names clients may use for it (hosts.allowed).
    host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()


class Guard(BaseHTTPMiddleware):
    """Basic auth (when a password is set) and security headers on every response."""

    def __init__(self, app: Any, config: Config) -> None:
        super().__init__(app)
        self.config = config
        self.hosts = hosts.allowed(config.host, config.allowed_hosts)

    async def dispatch(self, request: Request, call_next: Next) -> Response:
        # Before auth: a rebound name gets nothing, not even a password prompt.
        if request.url.path != "/healthz" and not hosts.host_ok(request.headers.get("host", ""), self.hosts):
            return PlainTextResponse(
                "this dashboard does not serve the Host this request names (pgq dashboard --allowed-host)\n",
                status_code=421,
            )
        needs_auth = self.config.password is not None and request.url.path != "/healthz"
        if needs_auth and not _authorized(request.headers.get("authorization", ""), self.config):
            return PlainTextResponse(
                "authentication required\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Basic realm="pgq dashboard", charset="UTF-8"'},
            )
        response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response


def _authorized(header: str, config: Config) -> bool:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        user, sep, password = base64.b64decode(value, validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return False
    ok_user = hmac.compare_digest(user.encode(), config.user.encode())
    ok_password = hmac.compare_digest(password.encode(), (config.password or "").encode())
    return bool(sep) and ok_user and ok_password


class Sessions:
    """Per-browser CSRF tokens. The cookie holds a random session id and its HMAC (so a
    cookie planted by someone else is refused); the page's token is another HMAC of that
    id. Another browser's token, or a token without its cookie, does not pass."""

    COOKIE = "pgq_session"

    def __init__(self, secret: bytes) -> None:
        self.secret = secret

    def _mac(self, purpose: bytes, session: str) -> str:
        return hmac.new(self.secret, purpose + session.encode(), hashlib.sha256).hexdigest()

    def new(self) -> str:
        return secrets.token_hex(16)

    def of(self, request: Request) -> str | None:
        """The session id of the request's cookie when its signature holds, else None."""
        session, _, mac = request.cookies.get(self.COOKIE, "").partition(".")
        if session and hmac.compare_digest(mac.encode(), self._mac(b"cookie:", session).encode()):
            return session
        return None

    def token(self, session: str) -> str:
        return self._mac(b"csrf:", session)

    def set_cookie(self, response: Response, request: Request, session: str) -> None:
        # HttpOnly: no script reads it; Strict: no other site's request carries it.
        response.set_cookie(
            self.COOKIE,
            f"{session}.{self._mac(b'cookie:', session)}",
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
