"""Sites under real public-suffix names, answered locally, for the cookie tests.

:func:`virtual_hosts` runs an HTTP forward proxy on 127.0.0.1 that answers every host name
itself: a client sends it ``GET http://alice.github.io/p HTTP/1.1`` (the absolute form a proxy
gets) and the site of that name answers, so ``alice.github.io`` and ``bob.github.io`` are two
real tenants of a shared suffix, with real ``Set-Cookie`` and ``Cookie`` headers. A request that
is not in absolute form (not sent to a proxy) is refused. :func:`tls_and_plain` serves the same
site on two ports of 127.0.0.1, one with TLS: one cookie host, reached over https and http.

Every site answers any path: ``?c=LINE`` adds ``Set-Cookie: LINE`` (repeatable), ``?go=URL`` a
link (repeatable), ``?post=URL`` a form that POSTs there; the page shows the ``Cookie`` header it
was sent (``<p id="cookie">``), and :attr:`Heard` records it with the host and path.
"""

from __future__ import annotations

import html
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from aiohttp import web

from eclaw.testing import serve
from tests.proxies import self_signed


@dataclass(frozen=True)
class Heard:
    """One request a site got: its host, method, path with query, and ``Cookie`` header."""

    host: str
    method: str
    path: str
    cookie: str | None


@dataclass
class Sites:
    """The proxy's address (``http://127.0.0.1:PORT``) and what every site heard, in order."""

    proxy: str = ""
    heard: list[Heard] = field(default_factory=list)

    def cookies(self, host: str, path_prefix: str = "/") -> list[str | None]:
        """The ``Cookie`` headers ``host`` got on paths under ``path_prefix``."""
        return [h.cookie for h in self.heard if h.host == host and h.path.startswith(path_prefix)]


def page(url: str, *, cookies: Iterable[str] = (), links: Iterable[str] = (), post: str = "") -> str:
    """``url`` with the query that makes its site set ``cookies``, link to ``links``, post to ``post``."""
    query = [("c", line) for line in cookies] + [("go", link) for link in links] + ([("post", post)] if post else [])
    return f"{url}?{urlencode(query)}" if query else url


def site(heard: list[Heard], *, proxied: bool = False) -> web.Application:
    """The one site every host serves (see the module's docstring); ``proxied``: as a proxy, which
    refuses a request not in absolute form."""

    async def answer(request: web.Request) -> web.Response:
        cookie = request.headers.get("Cookie")
        heard.append(Heard(request.host.partition(":")[0], request.method, request.path_qs, cookie))
        links = "".join(f'<a href="{html.escape(u)}">link</a>' for u in request.query.getall("go", []))
        post = request.query.get("post")
        form = f'<form method="post" action="{html.escape(post)}"><input name="x" value="1"></form>' if post else ""
        body = f'<html><body><p id="cookie">{html.escape(cookie or "")}</p>{links}{form}</body></html>'
        response = web.Response(text=body, content_type="text/html")
        for line in request.query.getall("c", []):
            response.headers.add("Set-Cookie", line)
        return response

    @web.middleware
    async def absolute_form_only(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        # A client talking to a proxy names the whole URL on its request line; a direct request names
        # a path only: refusing those proves each request went through the proxy.
        if not request.raw_path.startswith("http://"):
            return web.Response(status=400, text="a proxy wants an absolute URL")
        return await handler(request)

    app = web.Application(middlewares=[absolute_form_only] if proxied else [])
    app.router.add_route("*", "/{tail:.*}", answer)
    return app


@asynccontextmanager
async def virtual_hosts() -> AsyncIterator[Sites]:
    """A forward proxy on 127.0.0.1 that answers every host name with :func:`site` (any name:
    ``alice.github.io``, ``bob.co.uk``); yields its :class:`Sites`."""
    sites = Sites()
    async with serve(site(sites.heard, proxied=True)) as address:
        sites.proxy = address
        yield sites


@asynccontextmanager
async def tls_and_plain(workdir: Path) -> AsyncIterator[tuple[str, str, Sites]]:
    """:func:`site` on two ports of 127.0.0.1 (one cookie host), over TLS on the first, plain
    http on the second (a throwaway self-signed certificate: crawl with ``verify_tls=False``);
    yields both base URLs and the :class:`Sites` (no proxy)."""
    sites = Sites()
    runner = web.AppRunner(site(sites.heard))
    await runner.setup()
    context: ssl.SSLContext = self_signed(workdir)
    secure = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await secure.start()
    try:
        async with serve(site(sites.heard)) as plain:
            yield f"https://127.0.0.1:{runner.addresses[0][1]}", plain, sites
    finally:
        await runner.cleanup()
