"""The headers one hop of a request carries beyond its own: the cookies of its jar, the basic auth
of the hop's host, the ``Referer``; and the cookies each response sets, kept in the jar.

A fetcher that follows redirects hop by hop (the plain one) asks :class:`HopHeaders` for every
hop, so a cookie set by a redirect reaches its target, and the request's own credentials
(``Authorization``, a ``Cookie`` header, every sensitive header) follow the one rule of
:mod:`eclaw.security.scope`: its own origin only, never over http after https.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from multidict import CIMultiDictProxy

from eclaw.http import Request
from eclaw.security.headers import sensitive_headers
from eclaw.security.scope import scoped, why_not_carried
from eclaw.sessions.auth import HostAuth
from eclaw.sessions.jars import CookieJars, jar_key
from eclaw.sessions.referrer import META_KEY as POLICY_KEY
from eclaw.sessions.referrer import referrer

__all__ = ["HopHeaders", "merge_cookies", "referer_for"]

logger = logging.getLogger(__name__)

_EMPTY: dict[str, str] = {}


class HopHeaders:
    """The headers of each hop, for one crawl.

    Args:
        jars: the crawl's cookie jars (``None``: cookies are off; a request's ``cookies`` are
            still sent, to its own host).
        auth: basic auth by host.
        referer: send the ``Referer`` of requests that have one.
        sensitive: the ``sensitive_headers`` setting (headers scoped like ``Authorization``).
    """

    def __init__(self, jars: CookieJars | None, auth: HostAuth, *, referer: bool = True, sensitive: str = "") -> None:
        self.jars = jars
        self._auth = auth
        self._referer = referer
        self._sensitive = sensitive_headers(sensitive)

    def headers(self, request: Request, url: str, chain: Sequence[str] = ()) -> Mapping[str, str]:
        """What to send to ``url``, a hop of ``request`` after the hops of ``chain`` (the URLs before
        it, ``request.url`` first; empty for its first hop). The request's own credentials follow
        :mod:`eclaw.security.scope`; its ``Proxy-Authorization`` is the proxy's, never sent here."""
        own = request._headers or _EMPTY
        names = {name.lower(): name for name in own} if own else _EMPTY  # lower-case -> as written
        why = why_not_carried(request.url, chain, url)
        moved = why is not None
        added: dict[str, str] = {}
        cookie = self._cookie(request, url, moved, None if moved or "cookie" not in names else own[names["cookie"]])
        if cookie:
            added["Cookie"] = cookie
        if self._auth and (moved or "authorization" not in names):
            auth = self._auth.header(url, chain)
            if auth:
                added["Authorization"] = auth
        if self._referer and request.referer and "referer" not in names:
            referer = referer_for(request.referer, url, request._meta.get(POLICY_KEY) if request._meta else None)
            if referer:
                added["Referer"] = referer
        if not moved and "cookie" not in names and "proxy-authorization" not in names:
            return {**own, **added} if added else own  # the common case: nothing of the request's to drop
        kept = scoped(own, self._sensitive, why, url)
        if "cookie" in names and not moved:  # the request's Cookie is in the merged one
            kept = {k: v for k, v in kept.items() if k.lower() != "cookie"}
        return {**kept, **added}

    def _cookie(self, request: Request, url: str, moved: bool, mine: str | None) -> str | None:
        """The ``Cookie`` header: the jar's cookies for ``url``, then the request's own (its ``cookies``
        and ``Cookie`` header, ``mine``: those the jar does not name; to the request's own host only).
        Its ``cookies`` follow the jar's rules (``Secure``, ``domain``, ``path``), with cookies off too."""
        meta = request._meta
        given = meta.get("cookies") if meta else None
        jars, key = self.jars, jar_key(request)
        if jars is None:
            if not given or moved:
                return mine
            jars = CookieJars()  # cookies off: a jar of this hop alone, so the same rules hold
            jars.set(key, request.url, given)
        elif given and url == request.url:
            jars.set(key, url, given)
        return merge_cookies(jars.header(key, url, initiator=request.referer, method=request.method), mine)

    def received(self, request: Request, url: str, headers: CIMultiDictProxy[str]) -> None:
        """A response from ``url`` (a hop of ``request``) came: keep the cookies it sets."""
        if self.jars is not None and "Set-Cookie" in headers:
            self.jars.store(jar_key(request), url, headers.getall("Set-Cookie"))


def referer_for(referer: str, url: str, policy: str | None = None) -> str | None:
    """The ``Referer`` to send to ``url`` from the page ``referer`` under the referrer ``policy``
    (:mod:`eclaw.sessions.referrer`; by default ``no-referrer-when-downgrade``: none from https to
    http); without credentials or fragment."""
    return referrer(referer, url, policy)


def merge_cookies(jar: str | None, own: str | None) -> str | None:
    """The jar's cookies, then those of ``own`` the jar does not name (the jar's value is the newer)."""
    if not own or not jar:
        return jar or own
    names = {pair.partition("=")[0].strip() for pair in jar.split(";")}
    extra = [pair.strip() for pair in own.split(";") if pair.strip() and pair.partition("=")[0].strip() not in names]
    return "; ".join([jar, *extra])
