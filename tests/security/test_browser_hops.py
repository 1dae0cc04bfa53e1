"""The browser and impersonate fetchers apply the one rule of what a hop may carry (issue 36, items
1 and 2): a request's credentials go on to its own origin's redirects and no further, never over
http after https; ``http_auth`` is sent by every fetcher, bound to scheme, host and port; and in
the browser a ``NO_PROXY`` host redirecting outside still goes through the proxy. Real Chromium,
real curl_cffi, real tinyproxy, and the one-port TLS-and-HTTP origin of tests/security/origins.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from eclaw import Engine, Response, Settings
from eclaw.middlewares import Proxy
from eclaw.testing import collect
from tests.conftest import assert_accounted
from tests.proxies import tinyproxy
from tests.security.origins import Origin
from tests.security.test_hops import KEYS, QUIET, Hops, to

pytestmark = pytest.mark.usefixtures("chromium")


class Rendered(Hops):
    """Renders ``start`` in Chromium; an item per page, with the hops it was redirected through."""

    name = "rendered"
    fetcher = "browser"

    def parse(self, response: Response) -> Iterator[Any]:
        for item in super().parse(response):
            yield {**item, "redirects": response.meta.get("redirect_urls", [])}


class Impersonated(Hops):
    name = "impersonated"
    fetcher = "impersonate"


async def run(spider: type[Hops], start: str, settings: Settings = QUIET, **args: Any) -> list[Any]:
    items, stats = await collect(spider, settings=None if "engine" in args else settings, start=start, **args)
    assert_accounted(stats)
    assert stats.requests_failed == 0, stats.failed_by_reason
    return items


def pages(origin: Origin) -> list[tuple[str, str]]:
    """Scheme and path of each page request the origin heard (not the browser's favicon requests)."""
    return [(seen.scheme, seen.path.partition("?")[0]) for seen in origin.heard if seen.path != "/favicon.ico"]


async def test_the_browser_keeps_credentials_on_a_same_origin_redirect(origin: Origin) -> None:
    here = origin.url("https", "/here")
    start = to(origin, "https", here)  # a login-protected site redirecting /a to /a/, say
    [item] = await run(Rendered, start, headers=KEYS)
    assert (item["url"], item["title"], item["redirects"]) == (here, "https /here", [start])  # as Chromium says
    assert pages(origin) == [("https", "/to"), ("https", "/here")]
    assert [name for name in KEYS if name in origin.heard[1].headers] == list(KEYS)


@pytest.mark.parametrize("where", ["https to http", "another host"])
async def test_the_browser_drops_credentials_off_their_origin(origin: Origin, where: str) -> None:
    target = origin.url("http", "/there") if where == "https to http" else origin.url("https", "/there", "127.0.0.2")
    start = to(origin, "https", target)
    [item] = await run(Rendered, start, headers=KEYS)
    assert (item["url"], item["redirects"]) == (target, [start])
    assert pages(origin) == [("https", "/to"), (target.partition(":")[0], "/there")]
    assert [name for name in KEYS if name in origin.heard[0].headers] == list(KEYS)
    assert [name for name in KEYS if name in origin.heard[1].headers] == []


async def test_the_browser_sends_a_no_proxy_hosts_redirect_elsewhere_through_the_proxy(
    origin: Origin, tmp_path: Path
) -> None:
    async with tinyproxy(tmp_path) as (address, log):
        env = {"HTTP_PROXY": f"http://{address}", "HTTPS_PROXY": f"http://{address}", "NO_PROXY": "127.0.0.1"}
        start = to(origin, "http", origin.url("http", "/there", host="127.0.0.2"))
        items = await run(Rendered, start, engine=Engine(QUIET, middlewares=[Proxy.from_env(env)]), headers={})
    assert [item["title"] for item in items] == ["http /there"]
    proxied = log.read_text()
    assert f"GET http://127.0.0.2:{origin.port}/there" in proxied and f"127.0.0.1:{origin.port}" not in proxied
    assert [("Via" in seen.headers) for seen in origin.heard if seen.path != "/favicon.ico"] == [False, True]


@pytest.mark.parametrize("spider", [Impersonated, Rendered], ids=["impersonate", "browser"])
async def test_http_auth_goes_to_its_own_origin_and_not_after_a_downgrade(origin: Origin, spider: type[Hops]) -> None:
    settings = QUIET.replace(http_auth=f"alice:pw@127.0.0.1:{origin.port}")
    start = to(origin, "https", origin.url("http", "/plain"))  # the same host and port, downgraded
    await run(spider, start, settings)
    assert [(scheme, path) for scheme, path in origin.with_header("Authorization")] == [("https", "/to")]
    assert origin.heard[0].headers["Authorization"] == "Basic YWxpY2U6cHc="  # alice:pw
    origin.heard.clear()
    elsewhere = origin.url("https", "/to?url=" + quote(origin.url("https", "/in"), safe=""), host="127.0.0.2")
    await run(spider, elsewhere, settings)  # from another host to the credential's own origin
    assert origin.with_header("Authorization") == [("https", "/in")]
