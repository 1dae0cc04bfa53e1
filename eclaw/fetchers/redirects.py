"""Redirects followed by eclaw, hop by hop, the same way whichever fetcher sends the hops.

A fetcher gives :func:`follow` a function that sends one hop (given the hops before it, so the
hop carries what :mod:`eclaw.security.scope` lets it, through the proxy :func:`hop_proxy` names)
and answers with the status, headers, body and ``Location`` (``None`` unless it is a redirect to follow: a 3xx,
or a page whose ``<meta http-equiv="refresh">`` the fetcher follows, a GET like a 303);
:func:`follow` catches loops, the hop limit, offsite hops and non-http targets, and
records the hops in ``request.meta["redirect_urls"]``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from multidict import CIMultiDictProxy

from eclaw.exceptions import IgnoreRequest, InvalidURL, RedirectLoop, TooManyRedirects, UnsupportedRedirect
from eclaw.frontier.base import offsite
from eclaw.http import Request, Response
from eclaw.http.urls import canonical_url

if TYPE_CHECKING:
    from eclaw.contracts import ChoosesProxy, HopCheck

__all__ = ["PROXY_CHOOSER", "REDIRECTS", "Hop", "SendHop", "follow", "hop_proxy"]

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
