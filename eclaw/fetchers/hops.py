"""A request's hops, the same whichever fetcher sends them: what each hop carries beyond the
request's own headers (:class:`HopHeaders`: the cookies of its jar, the basic auth of the hop's
host, the ``Referer``; the cookies each response sets, kept in the jar; the proxy :func:`hop_proxy`
names), and the redirect from one hop to the next (:func:`follow`).

A fetcher gives :func:`follow` a function that sends one hop (given the hops before it, so the hop
carries what :mod:`eclaw.security.scope` lets it: the request's own credentials, ``Authorization``,
a ``Cookie`` header and every sensitive header, go to its own origin only, never over http after
https) and answers with the status, headers, body and ``Location`` (``None`` unless it is a redirect
to follow: a 3xx, or a page whose ``<meta http-equiv="refresh">`` the fetcher follows, a GET like a
303); :func:`follow` catches loops, the hop limit, offsite hops and non-http targets, and records
the hops in ``request.meta["redirect_urls"]``. A fetcher that follows redirects hop by hop (the
plain one) asks :class:`HopHeaders` for every hop, so a cookie set by a redirect reaches its target.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from multidict import CIMultiDictProxy

from eclaw.exceptions import IgnoreRequest, InvalidURL, RedirectLoop, TooManyRedirects, UnsupportedRedirect
from eclaw.frontier.base import offsite
from eclaw.http import Request, Response
from eclaw.http.urls import canonical_url
from eclaw.security.headers import sensitive_headers
from eclaw.security.scope import scoped, why_not_carried
from eclaw.sessions.auth import HostAuth
from eclaw.sessions.jars import CookieJars, jar_key
from eclaw.sessions.referrer import META_KEY as POLICY_KEY
from eclaw.sessions.referrer import referrer

if TYPE_CHECKING:
    from eclaw.contracts import ChoosesProxy, HopCheck

__all__ = [
    "PROXY_CHOOSER", "REDIRECTS", "Hop", "HopHeaders", "SendHop", "follow", "hop_proxy", "merge_cookies", "referer_for",
]  # fmt: skip


REDIRECTS = frozenset({301, 302, 303, 307, 308})

Hop = tuple[int, CIMultiDictProxy[str], bytes, str | None]  # status, headers, body, Location to follow
# (request, url, method, body, chain): chain is the URLs sent before this hop, request.url first
SendHop = Callable[[Request, str, str, bytes, Sequence[str]], Awaitable[Hop]]
PROXY_CHOOSER = "proxy_chooser"  # the meta key of a request's ChoosesProxy (the Proxy middleware's)


async def follow(
    request: Request, send: SendHop, allowed: frozenset[str], max_redirects: int, *, check: HopCheck | None = None
) -> Response:
    """Send ``request`` with ``send``, following its redirects; the final response. Each hop is
    vetted by ``check`` (the crawl's request-phase checks: robots...) before it is sent.

    Raises:
        TooManyRedirects: more than ``max_redirects`` hops.
        RedirectLoop: a hop back to a URL already visited.
        UnsupportedRedirect: a hop to a non-http(s) or malformed URL.
        IgnoreRequest: ``"offsite redirect"``, a hop off ``allowed`` (hosts and their subdomains)
            unless the request is ``dont_filter`` or has ``meta["allow_offsite"]``; or a hop ``check`` refused.
    """
    url, method, body = request.url, request.method, request.body
    seen: set[str] = set()  # canonical URLs of the hops, filled only if there are redirects
    hops: list[str] = []
    sent = request  # what the hops are made of: a GET without the body's headers once the body is dropped
    while True:
        status, headers, data, location = await send(sent, url, method, body, hops)
        if location is None:
            if hops:
                request.meta["redirect_urls"] = hops
            return Response(url, status=status, headers=headers, body=data, request=request)
        hops.append(url)
        seen.add(canonical_url(url))
        if len(hops) > max_redirects:
            raise TooManyRedirects(f"more than {max_redirects} redirects from {request.url}")
        url = _next_hop(request, url, location, seen, allowed)
        if check is not None:
            await check(request, url)
        if status == 303 or (status in (301, 302) and method == "POST") or status < 300:  # < 300: a meta refresh
            if method != "GET" or body:
                sent = _as_get(request)
            method, body = "GET", b""


async def hop_proxy(request: Request, url: str, chain: Sequence[str]) -> str | None:
    """The proxy of the hop to ``url`` after ``chain``: the request's ``meta["proxy"]`` for its first hop
    (and for every hop when it was set by hand), else what its ``meta["proxy_chooser"]`` chooses."""
    meta = request._meta  # not request.meta: that would give every request a dict
    if not meta:
        return None
    chooser: ChoosesProxy | None = meta.get(PROXY_CHOOSER) if chain else None
    if chooser is not None:
        return await chooser.proxy_for(url)
    return meta.get("proxy") or None


def _next_hop(request: Request, url: str, location: str, seen: set[str], allowed: frozenset[str]) -> str:
    target = urljoin(url, _location(url, location))
    scheme = target.partition(":")[0].lower()
    if scheme not in ("http", "https"):
        raise UnsupportedRedirect(f"redirect from {url} to {target}")
    try:
        target = Request(target).url
    except InvalidURL as exc:
        raise UnsupportedRedirect(f"redirect from {url} to bad URL: {exc}") from None
    if offsite(request, target, allowed):
        raise IgnoreRequest("offsite redirect")
    canon = canonical_url(target)
    if canon in seen:
        raise RedirectLoop(f"redirect loop at {target}")
    seen.add(canon)
    return target


_UNDECODED = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8, as aiohttp hands them over


def _location(url: str, location: str) -> str:
    """``Location`` read as Scrapy reads it: bytes that are not UTF-8 (Latin-1) percent-encoded as they
    are, and ``//host/path`` or ``///host/path`` taken as ``scheme://host/path``."""
    if not location.isascii():
        location = _UNDECODED.sub(lambda m: f"%{ord(m.group()) - 0xDC00:02X}", location)
    if location.startswith("//"):
        return f"{url.partition(':')[0]}://{location.lstrip('/')}"
    return location


# the headers that describe a body (the Fetch standard's request-body-header names)
_BODY_HEADERS = frozenset(
    {"content-type", "content-length", "content-encoding", "content-language", "content-location"}
)


def _as_get(request: Request) -> Request:
    """``request`` as the GET a redirect turns it into: without the headers of the body it no longer
    sends (the server would wait for it), as Scrapy's RedirectMiddleware does; the same meta."""
    own = request._headers
    get = request.replace(headers={k: v for k, v in own.items() if k.lower() not in _BODY_HEADERS} if own else None)
    get.method, get.body, get._meta = "GET", b"", request._meta
    return get


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
        jars, key = self.jars, jar_key(meta)
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
            self.jars.store(jar_key(request._meta), url, headers.getall("Set-Cookie"))


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
