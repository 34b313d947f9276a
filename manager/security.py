"""The manager's defences (seed 5.3): authentication, cross-site requests, DNS rebinding, log paths.

- **Basic authentication** (what scrapyd and its clients use): Twisted's ``HTTPAuthSessionWrapper`` around the whole
  site when CRAWLFLEET_MANAGER_AUTH is set; :mod:`manager.config` refuses a non-loopback bind without it.
- **Cross-site requests** (:func:`state_change_refusal`): every state-changing request (POST, PUT, PATCH, DELETE)
  whose ``Origin`` — or, without one, ``Referer`` — names another origin (``null`` included), or that a browser
  marks ``Sec-Fetch-Site: cross-site``/``same-site``, is refused with 403. Then it must carry one of:

  1. this manager's form token (:class:`CsrfToken`: the ``csrf_token`` field of the pages' forms, or an
     ``X-CSRF-Token`` header), which another origin cannot read (no page sends a CORS header);
  2. a JSON body (``Content-Type: application/json``): a page elsewhere cannot send that type without a CORS
     preflight, which is never granted, and a browser's same-origin request names this origin (checked above);
  3. no ``Origin`` at all, and either no body (``curl -X POST …/stop``, an API action) or, for scrapyd's API
     (``/<name>.json``) only, a form body: what scrapyd's clients send (scrapyd-client, ScrapydWeb, Gerapy, curl;
     with basic authentication when it is on). A browser always sends ``Origin`` on a POST, and a form always has a
     body, so a browser's form needs the token.

  Anything else (a ``text/plain`` body to ``/api/…``, a form to a page without the token) is refused with 403.
- **DNS rebinding**: without authentication (loopback only) a request must name a loopback host or this manager's
  own URL host in ``Host``, so a page of another site that rebinds its name to 127.0.0.1 is refused.
- **Log paths**: each segment of ``/logs/<project>/<spider>/<job>.log`` must match a strict pattern and the resolved
  file must lie inside the log directory (:func:`safe_log_file`), so ``../`` (encoded or not) never leaves it.
"""

from __future__ import annotations

import hmac
import re
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from twisted.cred import credentials
from twisted.cred import error as cred_error
from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.portal import IRealm, Portal
from twisted.internet import defer
from twisted.web.guard import BasicCredentialFactory, HTTPAuthSessionWrapper
from twisted.web.resource import IResource
from zope.interface import implementer

SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}
UNSAFE_METHODS = {b"POST", b"PUT", b"PATCH", b"DELETE"}


@implementer(IRealm)
class _Realm:
    def __init__(self, resource: Any) -> None:
        self.resource = resource

    def requestAvatar(self, avatar_id: Any, mind: Any, *interfaces: Any) -> Any:
        if IResource in interfaces:
            return IResource, self.resource, lambda: None
        raise NotImplementedError


@implementer(ICredentialsChecker)
class _OneUser:
    credentialInterfaces = (credentials.IUsernamePassword,)

    def __init__(self, user: str, password: str) -> None:
        self.user, self.password = user.encode(), password.encode()

    def requestAvatarId(self, creds: Any) -> Any:
        if hmac.compare_digest(creds.username, self.user) and hmac.compare_digest(creds.password, self.password):
            return defer.succeed(creds.username)
        return defer.fail(cred_error.UnauthorizedLogin())


def with_basic_auth(resource: Any, auth: tuple[str, str] | None) -> Any:
    if auth is None:
        return resource
    portal = Portal(_Realm(resource), [_OneUser(*auth)])
    return HTTPAuthSessionWrapper(portal, [BasicCredentialFactory(b"crawlfleet manager")])


def _origin_of(url: str) -> tuple[str, str] | None:
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return None
    return parts.scheme.lower(), parts.netloc.lower()


def cross_site_reason(request: Any) -> str | None:
    """Why a state-changing request looks cross-site, or None."""
    if request.method not in UNSAFE_METHODS:
        return None
    host = (request.getHeader(b"host") or b"").decode("latin-1").lower()
    fetch_site = (request.getHeader(b"sec-fetch-site") or b"").decode("latin-1").lower()
    if fetch_site in ("cross-site", "same-site"):
        return f"Sec-Fetch-Site: {fetch_site}"
    for header in (b"origin", b"referer"):
        value = request.getHeader(header)
        if value is None:
            continue
        text = value.decode("latin-1")
        origin = _origin_of(text)
        if origin is None or origin[1] != host:
            return f"{header.decode()} {text!r} is not this manager ({host})"
        return None  # Origin checked; Referer only when Origin is absent
    return None


JSON_TYPE = re.compile(r"application/(?:[\w.+-]+\+)?json\s*(?:;|$)", re.I)
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
SCRAPYD_API = re.compile(rb"/[A-Za-z]+\.json\Z")
TOKEN_HEADER = b"x-csrf-token"


def _content_type(request: Any) -> str:
    return (request.getHeader(b"content-type") or b"").decode("latin-1").strip()


def state_change_refusal(request: Any, csrf: CsrfToken) -> str | None:
    """Why a state-changing request is refused (the rule in the module docstring), or None when it may go on."""
    if request.method not in UNSAFE_METHODS:
        return None
    reason = cross_site_reason(request)
    if reason is not None:
        return f"cross-site request refused: {reason}"
    token = request.getHeader(TOKEN_HEADER) or (request.args.get(b"csrf_token") or [None])[0]
    if csrf.valid(token):
        return None
    content_type = _content_type(request)
    if JSON_TYPE.match(content_type):
        return None
    if request.getHeader(b"origin") is None:
        bodiless = not content_type and request.getHeader(b"content-length") in (None, b"0") \
            and request.getHeader(b"transfer-encoding") is None
        form = content_type.lower().startswith(FORM_TYPES)
        if bodiless or (form and SCRAPYD_API.match(request.path or b"")):
            return None
    return (f"a state-changing request needs the form token (reload the page), or a JSON body (Content-Type: "
            f"application/json), not {content_type or 'no content type'}")


def host_allowed(request: Any, own_url: str, bind: str) -> bool:
    """DNS-rebinding guard for a manager without authentication: Host must be loopback or this manager."""
    host = (request.getHeader(b"host") or b"").decode("latin-1").lower()
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    allowed = LOOPBACK_HOSTS | {bind.lower(), (urlsplit(own_url).hostname or "").lower()}
    return name in allowed or name.strip("[]") in allowed or name.startswith("127.")


class CsrfToken:
    """One secret per manager process, embedded in the pages' forms; another origin cannot read a page to get it."""

    def __init__(self, token: str | None = None) -> None:
        self.value = token or secrets.token_urlsafe(32)

    def valid(self, candidate: str | bytes | None) -> bool:
        if candidate is None:
            return False
        if isinstance(candidate, bytes):
            candidate = candidate.decode("latin-1")
        return hmac.compare_digest(candidate, self.value)


def safe_log_file(logs_dir: Path, segments: list[str]) -> Path | None:
    """The log file named by the URL segments ``<project>/<spider>/<job>.log``, or None when it is not one."""
    if len(segments) != 3 or not all(SEGMENT.match(s) for s in segments) or not segments[2].endswith(".log"):
        return None
    root = logs_dir.resolve()
    path = root.joinpath(*segments).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return None
    return path
