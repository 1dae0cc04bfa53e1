"""The proxy is chosen for each hop, and a proxy's credentials go to that proxy only (issue 36,
item 2): rotation and ``HTTP_PROXY``/``HTTPS_PROXY``/``NO_PROXY`` are evaluated again on every
redirect; a ``Proxy-Authorization`` never reaches an origin nor another proxy. Real tinyproxy
where its log says enough, a recording proxy (tests/security/origins.py) where we must see what
the proxy and the origin each received."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eclaw import Engine, Settings
from eclaw.middlewares import Proxy
from eclaw.testing import collect
from tests.proxies import tinyproxy
from tests.security.origins import Origin, recording_proxy
from tests.security.test_hops import Hops, crawl, to

QUIET = Settings(store="", verify_tls=False)
HAND_SET = "Basic aGFuZDpzZXQ="  # hand:set


async def through(proxy: Proxy, start: str, **args: Any) -> list[Any]:
    return await crawl(start, engine=Engine(QUIET, middlewares=[proxy]), **args)


class Impersonated(Hops):
    name = "impersonated"
    fetcher = "impersonate"


@pytest.mark.parametrize("spider", [Hops, Impersonated], ids=["plain", "impersonate"])
async def test_a_proxy_authorization_header_never_reaches_the_origin(origin: Origin, spider: type[Hops]) -> None:
    async with recording_proxy() as (address, proxy):
        start, meta = origin.url("https", "/page"), {"proxy": f"http://{address}"}
        items, _ = await collect(
            spider, settings=QUIET, start=start, headers={"Proxy-Authorization": HAND_SET}, meta=meta
        )
    assert [item["title"] for item in items] == ["https /page"]
    assert origin.with_header("Proxy-Authorization") == []  # not through the tunnel
    [tunnel] = proxy.heard
    assert tunnel.scheme == "connect" and tunnel.headers.get("Proxy-Authorization") == HAND_SET  # the proxy's
    origin.heard.clear()
    start = to(origin, "http", origin.url("http", "/there", host="127.0.0.2"))  # no proxy: nobody's to send it to
    await crawl(start, settings=QUIET, headers={"Proxy-Authorization": HAND_SET})
    assert [seen.path.partition("?")[0] for seen in origin.heard] == ["/to", "/there"]
    assert origin.with_header("Proxy-Authorization") == []


async def test_a_redirect_from_http_to_https_switches_to_the_https_proxy(origin: Origin, tmp_path: Path) -> None:
    async with tinyproxy(tmp_path) as (plain, plain_log), tinyproxy(tmp_path) as (secure, secure_log):
        env = {"HTTP_PROXY": f"http://{plain}", "https_proxy": f"http://{secure}"}  # either case is read
        items = await through(Proxy.from_env(env), to(origin, "http", origin.url("https", "/page")), headers={})
    assert [item["title"] for item in items] == ["https /page"]
    assert f"GET http://127.0.0.1:{origin.port}/to" in plain_log.read_text()
    assert f"CONNECT 127.0.0.1:{origin.port}" not in plain_log.read_text()
    assert f"CONNECT 127.0.0.1:{origin.port}" in secure_log.read_text()


async def test_a_no_proxy_host_redirecting_elsewhere_goes_through_the_proxy(origin: Origin, tmp_path: Path) -> None:
    async with tinyproxy(tmp_path) as (address, log):
        env = {"HTTP_PROXY": f"http://{address}", "NO_PROXY": "127.0.0.1"}
        start = to(origin, "http", origin.url("http", "/there", host="127.0.0.2"))
        items = await through(Proxy.from_env(env), start, headers={})
    assert [item["title"] for item in items] == ["http /there"]
    proxied = log.read_text()
    assert f"GET http://127.0.0.2:{origin.port}/there" in proxied and "127.0.0.1:" + str(origin.port) not in proxied
    assert ["Via" in seen.headers for seen in origin.heard] == [False, True]  # direct, then through tinyproxy


async def test_rotation_picks_a_proxy_for_each_hop_and_credentials_stay_with_theirs(origin: Origin) -> None:
    async with recording_proxy() as (first, heard_first), recording_proxy() as (second, heard_second):
        proxy = Proxy([f"http://alice:pr0xy-pw@{first}", f"http://{second}"])  # round-robin
        start = to(origin, "http", origin.url("http", "/there", host="127.0.0.2"))
        items = await through(proxy, start, headers={"Proxy-Authorization": HAND_SET})
    assert [item["title"] for item in items] == ["http /there"]
    assert [seen.path.partition("?")[0] for seen in heard_first.heard] == ["/to"]  # the first hop
    assert [seen.path for seen in heard_second.heard] == ["/there"]  # the redirect: the next proxy
    assert heard_first.heard[0].headers["Proxy-Authorization"] == "Basic YWxpY2U6cHIweHktcHc="  # alice's, its own
    assert heard_second.with_header("Proxy-Authorization") == []  # neither alice's nor the hand-set one
    assert origin.with_header("Proxy-Authorization") == []


async def test_a_proxy_set_by_hand_is_kept_on_every_hop(origin: Origin) -> None:
    async with recording_proxy() as (address, heard):
        start = to(origin, "http", origin.url("http", "/there", host="127.0.0.2"))
        await crawl(start, settings=QUIET, headers={}, meta={"proxy": f"http://{address}"})
    assert [seen.path.partition("?")[0] for seen in heard.heard] == ["/to", "/there"]
