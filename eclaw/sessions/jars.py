"""The crawl's cookie jars: one per key, chosen per request (``meta["cookiejar"]``), saved with ``--state``.

Each jar is a :class:`http.cookiejar.CookieJar` (the standard library's, which Scrapy
uses too): it parses ``Set-Cookie`` and decides which cookies to keep. Which ones a URL
gets is matched as browsers do (RFC 6265: host-only cookies stay on their host). A jar
is made when its first cookie arrives, so a crawl whose sites set no cookie pays
nothing per request.
"""

from __future__ import annotations

import logging
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from http.cookiejar import Cookie, CookieJar
from typing import Any
from urllib.parse import urlsplit

from eclaw.exceptions import BadRequest
from eclaw.http import Request

__all__ = ["CookieJars", "JarKey", "jar_key"]

logger = logging.getLogger(__name__)

JarKey = str | int | None  # None: the crawl's default jar

_FIELDS = (
    "version", "name", "value", "port", "port_specified", "domain", "domain_specified", "domain_initial_dot",
    "path", "path_specified", "secure", "expires", "discard", "comment", "comment_url",
)  # fmt: skip


def jar_key(request: Request) -> JarKey:
    """The key of ``request``'s jar: ``meta["cookiejar"]`` (a string or an integer), else ``None``."""
    meta = request._meta  # not request.meta: that would give every request a dict
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
        self._sent: dict[JarKey, list[Cookie]] = {}  # each jar's cookies, listed again when it changes

    def __repr__(self) -> str:
        return f"CookieJars({len(self._jars)} jars)"

    def __len__(self) -> int:
        return len(self._jars)

    def __contains__(self, key: object) -> bool:
        return key in self._jars

    def keys(self) -> list[JarKey]:
        return list(self._jars)

    def header(self, key: JarKey, url: str) -> str | None:
        """The ``Cookie`` header the jar ``key`` sends to ``url`` (``None``: no cookie).

        The cookies are those ``http.cookiejar`` accepted; which of them go to a URL is matched
        here (RFC 6265: domain, host-only, path, ``Secure``, expiry), in a few microseconds where the
        standard library's own lookup takes over a hundred, on every request of a site with cookies."""
        cookies = self._sent.get(key)
        if not cookies:
            return None
        parts = urlsplit(url)
        host = parts.hostname or ""
        erhn = host if "." in host else host + ".local"  # how http.cookiejar names a dotless host
        path, secure, now = parts.path or "/", parts.scheme == "https", time.time()
        chosen = [
            cookie
            for cookie in cookies
            if (cookie.expires is None or cookie.expires > now)
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

    def store(self, key: JarKey, url: str, set_cookies: list[str]) -> None:
        """Keep the cookies of ``Set-Cookie`` lines a response from ``url`` sent (those the jar accepts)."""
        if set_cookies:
            jar = self._jars.get(key)
            if jar is None:
                jar = self._jars[key] = CookieJar()
            jar.extract_cookies(_Headers(set_cookies), urllib.request.Request(url))  # type: ignore[arg-type]
            jar.clear_expired_cookies()
            self._sent[key] = list(jar)

    def set(self, key: JarKey, url: str, cookies: Mapping[str, str] | Iterable[Mapping[str, Any]]) -> None:
        """Put cookies a request brings (``meta["cookies"]``) in the jar, as if ``url`` had set them: a
        ``{name: value}`` mapping, or dicts with ``name``, ``value`` and optionally ``domain``, ``path``."""
        lines = []
        for cookie in _as_dicts(cookies):
            line = f"{cookie['name']}={cookie['value']}; Path={cookie.get('path') or '/'}"
            if cookie.get("domain"):
                line += f"; Domain={cookie['domain']}"
            lines.append(line)
        self.store(key, url, lines)

    def drop(self, key: JarKey) -> None:
        """Forget the jar ``key`` (a retired session's)."""
        self._jars.pop(key, None)
        self._sent.pop(key, None)

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
        for key, cookies in saved.get("jars", []):
            jar = self._jars[key] = CookieJar()
            for fields in cookies:
                httponly = fields.pop("httponly", False)
                jar.set_cookie(Cookie(**fields, rest={"HttpOnly": ""} if httponly else {}))
            self._sent[key] = list(jar)
        logger.info("cookies restored: %d jars", len(self._jars))

    async def flush(self) -> None:
        """Nothing to write ahead: the checkpoint holds the cookies."""


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
    fields["httponly"] = cookie.has_nonstandard_attr("HttpOnly")
    return fields


def _as_dicts(cookies: Mapping[str, str] | Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    if isinstance(cookies, Mapping):
        for name, value in cookies.items():
            yield {"name": name, "value": value}
        return
    for cookie in cookies:
        if not isinstance(cookie, Mapping) or "name" not in cookie or "value" not in cookie:
            raise BadRequest("meta['cookies'] must be a {name: value} dict or a list of dicts with name and value")
        yield cookie
