"""Redirects followed by eclaw, hop by hop, the same way whichever fetcher sends the hops.

A fetcher gives :func:`follow` a function that sends one hop and answers with the
status, headers, body and ``Location`` (``None`` unless it is a redirect to follow: a 3xx,
or a page whose ``<meta http-equiv="refresh">`` the fetcher follows, a GET like a 303);
:func:`follow` catches loops, the hop limit, offsite hops and non-http targets, and
records the hops in ``request.meta["redirect_urls"]``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urljoin

from multidict import CIMultiDictProxy

from eclaw.exceptions import IgnoreRequest, InvalidURL, RedirectLoop, TooManyRedirects, UnsupportedRedirect
from eclaw.http import Request, Response
from eclaw.http.urls import canonical_url, host_allowed, url_host

__all__ = ["REDIRECTS", "Hop", "SendHop", "follow"]

REDIRECTS = frozenset({301, 302, 303, 307, 308})

Hop = tuple[int, CIMultiDictProxy[str], bytes, str | None]  # status, headers, body, Location to follow
SendHop = Callable[[Request, str, str, bytes], Awaitable[Hop]]  # (request, url, method, body)


async def follow(request: Request, send: SendHop, allowed: frozenset[str], max_redirects: int) -> Response:
    """Send ``request`` with ``send``, following its redirects; the final response.

    Raises:
        TooManyRedirects: more than ``max_redirects`` hops.
        RedirectLoop: a hop back to a URL already visited.
        UnsupportedRedirect: a hop to a non-http(s) or malformed URL.
        IgnoreRequest: ``"offsite redirect"``, a hop off ``allowed`` (hosts and their subdomains).
    """
    url, method, body = request.url, request.method, request.body
    seen: set[str] = set()  # canonical URLs of the hops, filled only if there are redirects
    hops: list[str] = []
    while True:
        status, headers, data, location = await send(request, url, method, body)
        if location is None:
            if hops:
                request.meta["redirect_urls"] = hops
            return Response(url, status=status, headers=headers, body=data, request=request)
        hops.append(url)
        seen.add(canonical_url(url))
        if len(hops) > max_redirects:
            raise TooManyRedirects(f"more than {max_redirects} redirects from {request.url}")
        url = _next_hop(url, location, seen, allowed)
        if status == 303 or (status in (301, 302) and method == "POST") or status < 300:  # < 300: a meta refresh
            method, body = "GET", b""


def _next_hop(url: str, location: str, seen: set[str], allowed: frozenset[str]) -> str:
    target = urljoin(url, location)
    scheme = target.partition(":")[0].lower()
    if scheme not in ("http", "https"):
        raise UnsupportedRedirect(f"redirect from {url} to {target}")
    try:
        target = Request(target).url
    except InvalidURL as exc:
        raise UnsupportedRedirect(f"redirect from {url} to bad URL: {exc}") from None
    if not host_allowed(url_host(target), allowed):
        raise IgnoreRequest("offsite redirect")
    canon = canonical_url(target)
    if canon in seen:
        raise RedirectLoop(f"redirect loop at {target}")
    seen.add(canon)
    return target
