"""The crawl's cookie jars: one per key, chosen per request (``meta["cookiejar"]``), saved with ``--state``.

Each jar is a :class:`http.cookiejar.CookieJar` (the standard library's, which Scrapy uses
too): it parses ``Set-Cookie``. Which cookies it may keep follows the browsers' rules on top
(RFC 6265 and its successor, 6265bis): no ``Domain=`` a public suffix (``com``, ``co.uk``,
``github.io``: one tenant's cookie never reaches its neighbours), no ``Secure`` cookie set over
http nor one overwritten from http, the ``__Secure-`` and ``__Host-`` prefixes. Which cookies a
URL gets is matched here, as browsers do: host-only cookies stay on their host, ``Secure`` ones
go over https only, and ``SameSite`` ones stay off cross-site requests (:meth:`CookieJars.header`).
A jar is made when its first cookie arrives, so a crawl whose sites set no cookie pays nothing
per request.
"""

from __future__ import annotations

import logging
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from http.cookiejar import Cookie, CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import urlsplit

from eclaw.exceptions import BadRequest
from eclaw.http.suffixes import is_public_suffix, registered_domain

__all__ = ["CookieJars", "JarKey", "jar_key"]

logger = logging.getLogger(__name__)

JarKey = str | int | None  # None: the crawl's default jar

_FIELDS = (
    "version", "name", "value", "port", "port_specified", "domain", "domain_specified", "domain_initial_dot",
    "path", "path_specified", "secure", "expires", "discard", "comment", "comment_url",
)  # fmt: skip
_SAMESITE = {"lax": 1, "strict": 2}  # how far a cookie keeps off cross-site requests (None or unset: 0)
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_BAD_NAME = frozenset('=;, \t"\\()<>@:/[]?{}')  # RFC 6265 token separators


def jar_key(meta: Mapping[str, Any] | None) -> JarKey:
    """The key of the jar a request's ``meta`` names: ``meta["cookiejar"]`` (a string or an integer),
    else ``None`` (the jars know a request by this key alone, never the request itself)."""
    key = meta.get("cookiejar") if meta else None
    if key is not None and (isinstance(key, bool) or not isinstance(key, str | int)):
        raise BadRequest(f"meta['cookiejar'] must be a string or an integer, not {type(key).__name__}")
    return key


class _Headers:
    """The ``Set-Cookie`` lines of a response, as ``http.cookiejar`` reads them (``info().get_all``)."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines

    def get_all(self, name: str, default: list[str]) -> list[str]:
        return self._lines if name.lower() == "set-cookie" and self._lines else default

    def info(self) -> _Headers:
        return self


class CookieJars:
    """Cookie jars by key. Saved with a paused crawl (``--state``): it is
    :class:`~eclaw.contracts.Resumable`, like an output."""

    def __init__(self) -> None:
        self._jars: dict[JarKey, CookieJar] = {}
        self._policy = DefaultCookiePolicy()  # the standard library's checks (domain, path, port)
        # each jar's cookies with how far each keeps off cross-site requests, listed again when it changes
        self._sent: dict[JarKey, list[tuple[Cookie, int]]] = {}
        self._samesite: set[JarKey] = set()  # the jars with a SameSite cookie

    def __repr__(self) -> str:
        return f"CookieJars({len(self._jars)} jars)"

    def __len__(self) -> int:
        return len(self._jars)

    def __contains__(self, key: object) -> bool:
        return key in self._jars

    def keys(self) -> list[JarKey]:
        return list(self._jars)

    def header(self, key: JarKey, url: str, *, initiator: str | None = None, method: str = "GET") -> str | None:
        """The ``Cookie`` header the jar ``key`` sends to ``url`` (``None``: no cookie).

        Matched as browsers do (RFC 6265: domain, host-only, path, ``Secure``, expiry), in a few
        microseconds where the standard library's own lookup takes over a hundred, on every request
        of a site with cookies. ``SameSite``: a request whose ``initiator`` (the page it was found
        on, its ``referer``) is of another site (scheme and registrable domain) gets no ``Strict``
        cookie, and ``Lax`` ones only with a safe method (``GET``, ``HEAD``), as a browser's
        top-level navigation; a request with no initiator (a start URL) is same-site."""
        entries = self._sent.get(key)
        if not entries:
            return None
        parts = urlsplit(url)
        host = parts.hostname or ""
        erhn = host if "." in host else host + ".local"  # how http.cookiejar names a dotless host
        path, secure, now = parts.path or "/", parts.scheme == "https", time.time()
        # where no cookie of the jar has a SameSite, whether the request is cross-site does not matter
        allowed = _samesite_allowed(url, initiator, method) if key in self._samesite else 0
        chosen = [
            cookie
            for cookie, level in entries
            if level <= allowed
            and (cookie.expires is None or cookie.expires > now)
            and (secure or not cookie.secure)
            and _domain_match(cookie, erhn)
            and _path_match(cookie.path, path)
        ]
        if not chosen:
            return None
        chosen.sort(key=lambda cookie: len(cookie.path), reverse=True)  # the most specific first
        return "; ".join(c.name if c.value is None else f"{c.name}={c.value}" for c in chosen)

    def cookies(self, key: JarKey, url: str) -> dict[str, str]:
        """The cookies the jar ``key`` sends to ``url``, by name (for a fetcher that sets them itself)."""
        return dict(pair.partition("=")[::2] for pair in (self.header(key, url) or "").split("; ") if pair)

    def store(self, key: JarKey, url: str, set_cookies: list[str], *, given: bool = False) -> None:
        """Keep the cookies of ``Set-Cookie`` lines a response from ``url`` sent, those the rules allow
        (each one refused is named in a DEBUG line with why; never its value). ``given``: the lines
        are the request's own cookies (``meta["cookies"]``), not the network's, so a ``Secure`` one
        is kept (and sent over https only) even when ``url`` is http."""
        if not set_cookies:
            return
        jar = self._jars.get(key)
        if jar is None:
            jar = self._jars[key] = CookieJar(self._policy)
        request = urllib.request.Request(url)
        parts = urlsplit(url)
        host, https = (parts.hostname or "").lower(), parts.scheme == "https"
        current = self._sent.get(key, [])
        for cookie in jar.make_cookies(_Headers(set_cookies), request):  # type: ignore[arg-type]
            why = _refused(cookie, host, https or given, current)
            if why is None and not self._policy.set_ok(cookie, request):
                why = "its Domain, Path or Port does not match the URL (RFC 6265)"
            if why is not None:
                logger.debug("cookie %s from %s refused: %s", cookie.name, host, why)
                continue
            jar.set_cookie(cookie)
        jar.clear_expired_cookies()
        self._list(key, jar)

    def set(self, key: JarKey, url: str, cookies: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> None:
        """Put cookies a request brings (``meta["cookies"]``) in the jar, as if ``url`` had set them: a
        ``{name: value}`` mapping, or dicts with ``name``, ``value`` and optionally ``domain``,
        ``path``, ``secure`` and ``httponly``. A malformed one is skipped with a WARNING naming it."""
        self.store(key, url, [_set_cookie_line(cookie) for cookie in _given_cookies(cookies, url)], given=True)

    def drop(self, key: JarKey) -> None:
        """Forget the jar ``key`` (a retired session's)."""
        self._jars.pop(key, None)
        self._sent.pop(key, None)
        self._samesite.discard(key)

    def _list(self, key: JarKey, jar: CookieJar) -> None:
        """List the jar's cookies again (it changed), each with how far it keeps off cross-site requests."""
        entries = self._sent[key] = [(c, _SAMESITE.get(str(_rest(c).get("samesite")).lower(), 0)) for c in jar]
        if any(level for _, level in entries):
            self._samesite.add(key)
        else:
            self._samesite.discard(key)

    def __iter__(self) -> Iterator[tuple[JarKey, Cookie]]:
        for key, jar in list(self._jars.items()):
            for cookie in jar:
                yield key, cookie

    # -- Resumable: saved with --state ------------------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        """Every jar's unexpired cookies, session cookies included (a login must survive a pause)."""
        jars = []
        for key, jar in self._jars.items():
            jar.clear_expired_cookies()
            jars.append([key, [_saved(cookie) for cookie in jar]])
        return {"jars": jars}

    def restore(self, saved: dict[str, Any]) -> None:
        self._jars.clear()
        self._sent.clear()
        self._samesite.clear()
        for key, cookies in saved.get("jars", []):
            jar = self._jars[key] = CookieJar(self._policy)
            for fields in cookies:
                rest = fields.pop("rest", None) or {}
                if fields.pop("httponly", False):  # as states written before "rest" say it
                    rest["HttpOnly"] = None
                jar.set_cookie(Cookie(**fields, rest=rest))
            self._list(key, jar)
        logger.info("cookies restored: %d jars", len(self._jars))

    async def flush(self) -> None:
        """Nothing to write ahead: the checkpoint holds the cookies."""


def _given_cookies(cookies: Mapping[str, Any] | Iterable[Mapping[str, Any]], url: str) -> list[dict[str, Any]]:
    """The well-formed cookies of ``meta["cookies"]`` of a request for ``url``: names and values as
    strings (a number as Scrapy writes it, bytes decoded). A malformed one (no name or value, a
    value ``None``, a name not a string, a ``;`` or control character) is skipped with a WARNING
    that names it, never its value: the rest are sent."""
    if isinstance(cookies, Mapping):
        dicts: Iterable[Any] = ({"name": name, "value": value} for name, value in cookies.items())
    elif isinstance(cookies, list | tuple):
        dicts = cookies
    else:
        raise BadRequest("meta['cookies'] must be a {name: value} dict or a list of dicts with name and value")
    found = []
    for number, cookie in enumerate(dicts, start=1):
        checked = _checked(cookie)
        if isinstance(checked, str):
            name = cookie.get("name") if isinstance(cookie, Mapping) else None
            shown = repr(name) if isinstance(name, str) and len(name) <= 64 else f"#{number}"
            logger.warning("cookie %s for %s skipped: %s", shown, urlsplit(url).hostname, checked)
        else:
            found.append(checked)
    return found


def _checked(cookie: object) -> dict[str, Any] | str:
    """``cookie`` with its name and value as strings, or why it is malformed."""
    if not isinstance(cookie, Mapping):
        return f"a {type(cookie).__name__}, not a dict"
    fields = dict(cookie)
    for what in ("name", "value", "domain", "path"):
        if fields.get(what) is None:
            if what in ("name", "value"):
                return f"its {what} is missing"
            continue
        text = _text(fields[what])
        if text is None:
            return f"its {what} is a {type(fields[what]).__name__}, not a string"
        if any(ord(char) < 32 or char in ";\x7f" for char in text):  # would add attributes or headers
            return f"its {what} has a ';' or a control character"
        fields[what] = text
    if not fields["name"] or _BAD_NAME.intersection(fields["name"]):
        return "its name is empty or has a separator character"
    return fields


def _text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value)  # as Scrapy does
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value.decode("latin-1")
    return None


def _set_cookie_line(cookie: Mapping[str, Any]) -> str:
    line = f"{cookie['name']}={cookie['value']}; Path={cookie.get('path') or '/'}"
    if cookie.get("domain"):
        line += f"; Domain={cookie['domain']}"
    return line + "; Secure" * bool(cookie.get("secure")) + "; HttpOnly" * bool(cookie.get("httponly"))


def _refused(cookie: Cookie, host: str, secure_origin: bool, current: list[tuple[Cookie, int]]) -> str | None:
    """Why the browsers' rules refuse ``cookie``, set by ``host`` (``None``: they allow it); a
    ``Domain=`` the host's own name when that name is a public suffix makes it host-only."""
    name = cookie.name.lower()  # the prefixes are matched whatever their case (RFC 6265bis)
    if name.startswith("__secure-") and not (cookie.secure and secure_origin):
        return "a __Secure- cookie needs Secure, set over https"
    if name.startswith("__host-") and not (
        cookie.secure and secure_origin and not cookie.domain_specified and cookie.path_specified and cookie.path == "/"
    ):
        return "a __Host- cookie needs Secure, Path=/ and no Domain, set over https"
    if cookie.secure and not secure_origin:
        return "Secure, set over http"
    if cookie.domain_specified:
        domain = cookie.domain.lstrip(".")
        if is_public_suffix(domain):
            if domain != host:
                return f"Domain={domain} is a public suffix"
            cookie.domain = host if "." in host else host + ".local"  # RFC 6265 5.3 step 5: host-only
            cookie.domain_specified = cookie.domain_initial_dot = False
    if not secure_origin and _shadows_secure(cookie, current):
        return "set over http over a Secure cookie of the same name"
    return None


def _shadows_secure(cookie: Cookie, current: list[tuple[Cookie, int]]) -> bool:
    """Whether ``cookie`` would overwrite a ``Secure`` one (RFC 6265bis 5.6, "leave secure cookies alone")."""
    new = cookie.domain.lstrip(".")
    for old, _ in current:
        if old.secure and old.name == cookie.name and _path_match(old.path, cookie.path):
            domain = old.domain.lstrip(".")
            if domain == new or domain.endswith("." + new) or new.endswith("." + domain):
                return True
    return False


def _samesite_allowed(url: str, initiator: str | None, method: str) -> int:
    """The strictest ``SameSite`` a request for ``url`` from ``initiator`` gets (see ``header``)."""
    if initiator is None or _site(initiator) == _site(url):
        return _SAMESITE["strict"]
    return _SAMESITE["lax"] if method.upper() in _SAFE_METHODS else 0


def _site(url: str) -> tuple[str, str]:
    """A URL's site: its scheme and registrable domain (schemeful, as RFC 6265bis "same-site")."""
    parts = urlsplit(url)
    return parts.scheme.lower(), registered_domain(parts.hostname or "")


def _rest(cookie: Cookie) -> dict[str, Any]:
    """The cookie's attributes beyond the standard ones (``HttpOnly``, ``SameSite``), lower-case names."""
    return {name.lower(): value for name, value in (vars(cookie).get("_rest") or {}).items()}


def _domain_match(cookie: Cookie, erhn: str) -> bool:
    """A host-only cookie (no ``Domain``) goes to its host alone; a domain cookie to it and its subdomains."""
    if not cookie.domain_specified:
        return cookie.domain == erhn
    domain = cookie.domain if cookie.domain.startswith(".") else "." + cookie.domain
    return ("." + erhn).endswith(domain)


def _path_match(cookie_path: str, path: str) -> bool:
    if path == cookie_path:
        return True
    return path.startswith(cookie_path) and (cookie_path.endswith("/") or path[len(cookie_path)] == "/")


def _saved(cookie: Cookie) -> dict[str, Any]:
    fields = {name: getattr(cookie, name) for name in _FIELDS}
    fields["rest"] = dict(vars(cookie).get("_rest") or {})
    return fields
