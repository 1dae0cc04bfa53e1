"""A navigation that carries credentials, followed hop by hop before the page renders it.

Chromium sends a navigation's headers again on every redirect it follows, to any origin, and
no route sees those hops (Playwright: a route is called for the first URL of a redirect chain
only). So when a request's own headers hold a credential (``Authorization``, every header of
:func:`~eclaw.security.headers.sensitive_headers`) or ``http_auth`` is set, its redirects are
followed here, by :func:`eclaw.fetchers.hops.follow` as the other fetchers follow them
(loops, the hop limit, offsite hops, each hop vetted): each hop is fetched through the page's
context (its cookies, its proxy, its user agent) with what :mod:`eclaw.security.scope` lets it
carry, and the page then opens the final URL with the final answer (:class:`Served`), so
``response.url`` and ``meta["redirect_urls"]`` are what they would be had Chromium followed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from multidict import CIMultiDict, CIMultiDictProxy

from eclaw.exceptions import ResponseTooLarge
from eclaw.fetchers.browser.identity import FirstNavigation, navigation_overrides
from eclaw.fetchers.hops import REDIRECTS, Hop, follow
from eclaw.http import Request, Response
from eclaw.http.urls import redact_url
from eclaw.security.scope import scoped, why_not_carried
from eclaw.sessions.auth import HostAuth

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Route

    from eclaw.contracts import HopCheck

__all__ = ["CredentialHops", "Served"]

logger = logging.getLogger(__name__)

# what Chromium asks for when it navigates: a server that negotiates gives the hops the same page
_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
# not handed on: the body is decoded and measured already; cookies are in the context's jar
_NOT_SERVED = frozenset({"content-length", "content-encoding", "transfer-encoding", "set-cookie"})


class CredentialHops:
    """Follows the redirects of a request that carries credentials (see the module).

    Args:
        sensitive: the lower-case names of the sensitive headers.
        auth: ``http_auth``, bound to scheme, host and port.
        allowed: the spider's allowed domains (a hop off them is an offsite redirect).
        max_redirects: the hop limit.
        max_size: the largest body taken.
    """

    def __init__(
        self, sensitive: frozenset[str], auth: HostAuth, allowed: frozenset[str], max_redirects: int, max_size: int
    ) -> None:
        self._sensitive = sensitive
        self._auth = auth
        self._allowed = allowed
        self._max_redirects = max_redirects
        self._max_size = max_size
        self.check: HopCheck | None = None

    def needed(self, request: Request) -> bool:
        """Whether ``request``'s navigation is followed here: it holds a credential, or ``http_auth`` is set."""
        if self._auth:
            return True
        return any(name in self._sensitive for name in navigation_overrides(request).get("headers", ()))

    async def follow(self, context: BrowserContext, request: Request) -> Response:
        """The final answer to ``request``, its redirects followed through ``context`` (within the
        render's own time budget, which the caller holds)."""

        async def send(sent: Request, url: str, method: str, body: bytes, chain: Sequence[str]) -> Hop:
            headers = self._headers(sent, url, chain)
            answer = await context.request.fetch(
                url,
                method=method,
                headers=dict(headers),
                data=body or None,
                max_redirects=0,
                fail_on_status_code=False,
            )
            try:
                received = CIMultiDictProxy(CIMultiDict((h["name"], h["value"]) for h in answer.headers_array))
                location = received.get("Location")
                if answer.status in REDIRECTS and location:
                    return answer.status, received, b"", location
                data = await answer.body()
            finally:
                await answer.dispose()
            if len(data) > self._max_size:
                raise ResponseTooLarge(f"{redact_url(url)}: body over max_response_size {self._max_size}")
            return answer.status, received, data, None

        return await follow(request, send, self._allowed, self._max_redirects, check=self.check)

    def _headers(self, sent: Request, url: str, chain: Sequence[str]) -> Mapping[str, str]:
        """What the hop to ``url`` after ``chain`` carries: the request's own headers as
        :mod:`eclaw.security.scope` lets them go there, and the ``http_auth`` of its origin."""
        own: dict[str, str] = {"accept": _ACCEPT, **navigation_overrides(sent).get("headers", {})}
        kept = scoped(own, self._sensitive, why_not_carried(sent.url, chain, url), url)
        return self._auth.added(kept, url, chain)


class Served:
    """A page's route handler: answers the page's first navigation with ``response`` (fetched
    already, by :class:`CredentialHops`); every other request goes on to the network."""

    def __init__(self, response: Response) -> None:
        self._response = response
        self._first = FirstNavigation()

    async def __call__(self, route: Route) -> None:
        if not await self._first.claims(route):
            return
        answer = self._response
        headers: dict[str, Any] = {k: v for k, v in answer.headers.items() if k.lower() not in _NOT_SERVED}
        await route.fulfill(status=answer.status, headers=headers, body=answer.body)
