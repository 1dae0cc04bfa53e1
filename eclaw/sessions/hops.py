"""The headers one hop of a request carries beyond its own: the cookies of its jar, the basic auth
of the hop's host, the ``Referer``; and the cookies each response sets, kept in the jar.

A fetcher that follows redirects hop by hop (the plain one) asks :class:`HopHeaders` for every
hop, so a cookie set by a redirect reaches its target, and credentials meant for one host
(``Authorization``, a ``Cookie`` header the request was given) never reach another.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from multidict import CIMultiDictProxy

from eclaw.http import Request
from eclaw.sessions.auth import HostAuth
from eclaw.sessions.jars import CookieJars, jar_key

__all__ = ["HopHeaders", "merge_cookies", "referer_for"]

logger = logging.getLogger(__name__)

_OWN_HOST_ONLY = frozenset({"authorization", "cookie"})
_EMPTY: dict[str, str] = {}


class HopHeaders:
    """The headers of each hop, for one crawl.

    Args:
        jars: the crawl's cookie jars (``None``: cookies are off; a request's ``cookies`` are
            still sent, to its own host).
        auth: basic auth by host.
        referer: send the ``Referer`` of requests that have one.
    """

    def __init__(self, jars: CookieJars | None, auth: HostAuth, *, referer: bool = True) -> None:
        self.jars = jars
        self._auth = auth
        self._referer = referer

    def headers(self, request: Request, url: str) -> Mapping[str, str]:
        """What to send to ``url``, a hop of ``request`` (its first hop is ``request.url`` itself)."""
        own = request._headers or _EMPTY
        names = {name.lower(): name for name in own} if own else _EMPTY  # lower-case -> as written
        moved = url != request.url and _netloc(url) != _netloc(request.url)
        added: dict[str, str] = {}
        cookie = self._cookie(request, url, moved, None if moved or "cookie" not in names else own[names["cookie"]])
        if cookie:
            added["Cookie"] = cookie
        if self._auth and (moved or "authorization" not in names):
            auth = self._auth.header(url)
            if auth:
                added["Authorization"] = auth
        if self._referer and request.referer and "referer" not in names:
            referer = referer_for(request.referer, url)
            if referer:
                added["Referer"] = referer
        if not moved and "cookie" not in names:
            return {**own, **added} if added else own  # the common case: nothing of the request's to drop
        dropped = _OWN_HOST_ONLY if moved else {"cookie"}  # the request's Cookie is in the merged one
        return {**{k: v for k, v in own.items() if k.lower() not in dropped}, **added}

    def _cookie(self, request: Request, url: str, moved: bool, mine: str | None) -> str | None:
        """The ``Cookie`` header: the jar's cookies for ``url``, then the request's own (its ``cookies``
        and ``Cookie`` header, ``mine``: those the jar does not name; to the request's own host only)."""
        meta = request._meta
        given = meta.get("cookies") if meta else None
        jars = self.jars
        if jars is None:
            jar = None
        else:
            key = jar_key(request)
            if given and url == request.url:
                jars.set(key, url, given)
                given = None
            jar = jars.header(key, url)
        if given and not moved:
            pairs = given.items() if isinstance(given, Mapping) else ((c["name"], c["value"]) for c in given)
            mine = "; ".join([*(f"{name}={value}" for name, value in pairs), *([mine] if mine else [])])
        return merge_cookies(jar, mine)

    def received(self, request: Request, url: str, headers: CIMultiDictProxy[str]) -> None:
        """A response from ``url`` (a hop of ``request``) came: keep the cookies it sets."""
        if self.jars is not None and "Set-Cookie" in headers:
            self.jars.store(jar_key(request), url, headers.getall("Set-Cookie"))


def referer_for(referer: str, url: str) -> str | None:
    """The ``Referer`` to send to ``url`` from the page ``referer`` (policy
    ``no-referrer-when-downgrade``: none from https to http); without credentials or fragment."""
    if referer.startswith("https:") and url.startswith("http:"):
        return None
    if "@" in referer or "#" in referer:
        parts = urlsplit(referer)
        netloc = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    return referer


def _netloc(url: str) -> str:
    return url.partition("://")[2].partition("/")[0].partition("?")[0].rpartition("@")[2].lower()


def merge_cookies(jar: str | None, own: str | None) -> str | None:
    """The jar's cookies, then those of ``own`` the jar does not name (the jar's value is the newer)."""
    if not own or not jar:
        return jar or own
    names = {pair.partition("=")[0].strip() for pair in jar.split(";")}
    extra = [pair.strip() for pair in own.split(";") if pair.strip() and pair.partition("=")[0].strip() not in names]
    return "; ".join([jar, *extra])
