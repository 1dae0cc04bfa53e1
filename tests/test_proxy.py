"""Proxy rotation through a real forward proxy (tinyproxy), benching, bans and secrecy of credentials."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import ConfigError, Engine, Request, Response, Settings, Spider
from eclaw.exceptions import ConnectionLost
from eclaw.fetchers.plain import PlainFetcher
from eclaw.middlewares import Proxy, Retry, UserAgent, defaults
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, read_jsonl, record_file
from tests.proxies import free_port, self_signed, tinyproxy
from tests.sites import FlakySite, page

SECRET = "s3cret-Pa55"


class Pages(Spider):
    name = "pages"

    def parse(self, response: Response) -> Any:
        yield {"title": response.css("title::text").get()}


def assert_no_secret(caplog: pytest.LogCaptureFixture, stats: Any, *files: str) -> None:
    assert SECRET not in caplog.text
    assert SECRET not in json.dumps(stats.as_dict(), default=str) and SECRET not in stats.summary()
    for file in files:
        assert SECRET not in (Path(file).read_text() if Path(file).exists() else "")


async def crawl(proxy: Proxy, base: str, paths: list[str], **settings: Any) -> tuple[list[Any], Any]:
    engine = Engine(Settings(**settings), middlewares=[Retry(3, base=0.01), UserAgent(), proxy])
    items, stats = await collect(Pages, engine=engine, start_urls=[base + p for p in paths])
    assert_accounted(stats)
    return items, stats


async def test_crawl_through_a_real_proxy_with_credentials(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    site = FlakySite()
    async with tinyproxy(tmp_path, auth=("alice", SECRET)) as (address, log), serve(site.app()) as base:
        items, stats = await crawl(Proxy([f"http://alice:{SECRET}@{address}"]), base, [f"/ok/{n}" for n in range(5)])
    assert len(items) == 5
    assert stats.counters[f"proxy {address} ok"] == 5
    proxied = log.read_text()
    assert all(f"GET {base}/ok/{n} " in proxied for n in range(5))  # the proxy really carried them
    assert_no_secret(caplog, stats, record_file("pages", "failures"))


async def test_https_target_through_the_proxy_tunnel(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    site = FlakySite()
    runner = web.AppRunner(site.app())
    await runner.setup()
    port = await tls_site(runner, tmp_path)
    try:
        async with tinyproxy(tmp_path, auth=("alice", SECRET)) as (address, log):
            proxy = Proxy([f"http://alice:{SECRET}@{address}"])
            items, stats = await crawl(proxy, f"https://127.0.0.1:{port}", ["/ok/t1", "/ok/t2"], verify_tls=False)
    finally:
        await runner.cleanup()
    assert len(items) == 2 and stats.counters[f"proxy {address} ok"] == 2
    assert f"CONNECT 127.0.0.1:{port}" in log.read_text()  # tunnelled, authenticated with the credentials
    assert_no_secret(caplog, stats, record_file("pages", "failures"))


async def test_407_benches_the_proxy_and_wrong_credentials_stay_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    site = FlakySite()
    async with tinyproxy(tmp_path, auth=("alice", "right")) as (address, _), serve(site.app()) as base:
        items, stats = await crawl(Proxy([f"http://{address}"], cooldown=0.05), base, ["/ok/a"])
        assert items == [] and stats.failed_by_reason == {"proxy error": 1}
        assert stats.counters[f"proxy {address} banned"] == 4  # 407 on each of the 4 attempts
        assert stats.counters[f"proxy {address} benched"] == 1  # 3 in a row
        (record,) = read_jsonl(record_file("pages", "failures"))
        assert record["reason"] == "proxy error" and record["attempts"] == 4 and "407" in record["error"]
        # tinyproxy answers wrong credentials with 401 (not 407): ban it like any other status
        wrong = Proxy([f"http://alice:{SECRET}@{address}"], ban_statuses=(401,), cooldown=0.05)
        items, stats = await crawl(wrong, base, ["/ok/b"])
    assert items == [] and stats.counters[f"proxy {address} banned"] == 4
    assert_no_secret(caplog, stats, record_file("pages", "failures"))


async def test_dead_proxy_is_benched_and_the_live_one_takes_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    site = FlakySite()
    async with tinyproxy(tmp_path) as (address, _), serve(site.app()) as base:
        proxy = Proxy([f"http://bob:{SECRET}@{dead}", f"http://{address}"], max_failures=2, cooldown=60)
        items, stats = await crawl(proxy, base, [f"/ok/{n}" for n in range(12)], concurrency=2)
    assert len(items) == 12 and stats.requests_failed == 0
    assert stats.counters[f"proxy {dead} benched"] == 1 and stats.counters[f"proxy {dead} failed"] == 2
    assert stats.counters[f"proxy {address} ok"] == 12
    # the two requests that met the dead proxy went again; so did any the live proxy dropped (a loaded
    # machine's tinyproxy may lose a connection now and then): each retry is one proxy's counted failure
    assert stats.retries == 2 + stats.counters[f"proxy {address} failed"]
    assert_no_secret(caplog, stats, record_file("pages", "failures"))


async def test_all_proxies_benched_can_stop_the_crawl(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    site = FlakySite()
    async with serve(site.app()) as base:
        proxy = Proxy([dead], max_failures=1, when_all_benched="fail")
        items, stats = await crawl(proxy, base, [f"/ok/{n}" for n in range(5)], concurrency=1)
    assert items == [] and stats.finish_reason == "all proxies benched"
    assert "ok" not in {k.rsplit(" ", 1)[-1] for k in stats.counters}


async def test_ban_pattern_in_body_moves_to_another_proxy(tmp_path: Path) -> None:
    served: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        served.append(request.path)
        body = "please solve the CAPTCHA" if len(served) == 1 else "<title>fine</title>"
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    async with tinyproxy(tmp_path) as (address, _), serve(app) as base:
        port = address.rsplit(":", 1)[1]
        proxy = Proxy([f"http://127.0.0.1:{port}", f"http://localhost:{port}"], ban_pattern="(?i)captcha")
        items, stats = await crawl(proxy, base, ["/x"])
    assert items == [{"title": "fine"}] and len(served) == 2
    assert stats.counters[f"proxy 127.0.0.1:{port} banned"] == 1
    assert stats.counters[f"proxy localhost:{port} ok"] == 1


async def test_waits_for_a_benched_proxy_to_come_back() -> None:
    proxy = Proxy(["http://127.0.0.1:1", "http://127.0.0.1:2"], cooldown=0.3)
    for state in proxy.proxies:
        state.benched_until = time.monotonic() + 0.3
    started = time.monotonic()
    chosen = await asyncio.wait_for(proxy._choose("http://x.test/", "http"), 2)
    assert time.monotonic() - started >= 0.25 and chosen in proxy.proxies


def test_strategies_and_sticky_hosts() -> None:
    urls = ["http://10.0.0.1:1", "http://10.0.0.2:2", "http://10.0.0.3:3"]
    rr = Proxy(urls)
    assert [rr._pick("http://a.test/", rr.proxies).name for _ in range(4)] == [
        "10.0.0.1:1",
        "10.0.0.2:2",
        "10.0.0.3:3",
        "10.0.0.1:1",
    ]
    rnd = Proxy(urls, strategy="random", rng=random.Random(1))
    assert len({rnd._pick("http://a.test/", rnd.proxies).name for _ in range(50)}) == 3
    lrf = Proxy(urls, strategy="least-recently-failed")
    lrf.proxies[0].last_failure, lrf.proxies[1].last_failure = 5.0, 1.0
    lrf.proxies[2].last_failure = 9.0
    assert lrf._pick("http://a.test/", lrf.proxies).name == "10.0.0.2:2"
    sticky = Proxy(urls, sticky=True)
    first = sticky._pick("http://a.test/1", sticky.proxies)
    assert all(sticky._pick(f"http://a.test/{n}", sticky.proxies) is first for n in range(5))
    assert sticky._pick("http://b.test/", sticky.proxies) is not first
    assert sticky._pick("http://a.test/", [p for p in sticky.proxies if p is not first]) is not first  # benched


def test_proxy_sources_and_errors(tmp_path: Path) -> None:
    env = {"HTTP_PROXY": "http://u:p@10.0.0.1:3128", "https_proxy": "http://10.0.0.2:3128", "NO_PROXY": "internal.test"}
    proxy = Proxy.from_env(env)
    assert [(p.name, sorted(p.schemes)) for p in proxy.proxies] == [
        ("10.0.0.1:3128", ["http"]),
        ("10.0.0.2:3128", ["https"]),
    ]
    assert proxy._bypass("http://api.internal.test/x") and not proxy._bypass("http://other.test/")
    with pytest.raises(ConfigError, match="neither HTTP_PROXY nor HTTPS_PROXY"):
        Proxy.from_env({})
    listing = tmp_path / "proxies.txt"
    listing.write_text("# pool\nhttp://10.0.0.1:8080\n\nhttps://user:pw@10.0.0.2:8443\n")
    assert [p.name for p in Proxy.from_setting(f"@{listing}").proxies] == ["10.0.0.1:8080", "10.0.0.2:8443"]
    assert len(Proxy.from_setting("http://a.test:1, http://b.test:2").proxies) == 2
    with pytest.raises(ConfigError, match="socks6 proxies are not supported") as error:
        Proxy([f"socks6://u:{SECRET}@10.0.0.1:1080"])
    assert SECRET not in str(error.value)
    with pytest.raises(ConfigError, match="cannot read proxy list"):
        Proxy(tmp_path / "missing.txt")
    with pytest.raises(ConfigError, match="unknown strategy"):
        Proxy(["http://a.test:1"], strategy="fastest")  # type: ignore[arg-type]
    assert any(isinstance(m, Proxy) for m in defaults(Settings(proxies="http://a.test:1")))
    with pytest.raises(ConfigError, match="middleware settings: bad proxy"):
        Engine(Settings(proxies="ftp://a.test")).prepare(Pages)


class Closing:
    """Pages on keep-alive connections (HTTP/1.1, no ``Connection: close``) that the server closes
    without a word, as tinyproxy does: ``/moved`` (302 to ``/there``) and ``/there``, each
    connection closed after its answer; ``/pair/{n}`` answers once three are in, its connection kept;
    ``/lost/{n}`` is read, then its connection closed without an answer. ``served`` lists the paths read."""

    def __init__(self) -> None:
        self.served: list[str] = []
        self.pair = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.served.append(request.path)
        assert request.transport is not None
        if request.path.startswith("/lost/"):
            request.transport.close()
            return web.StreamResponse()
        if request.path.startswith("/pair/"):
            if sum(path.startswith("/pair/") for path in self.served) == 3:
                self.pair.set()
            await asyncio.wait_for(self.pair.wait(), 5)
            return page(title="pair")
        if request.path == "/moved":
            response: web.StreamResponse = web.Response(status=302, headers={"Location": "/there"}, text="moved")
        else:
            response = page(title="there")
        await response.prepare(request)
        await response.write_eof()
        request.transport.close()  # after the answer, saying nothing
        return response

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app


async def crawl_redirect(address: str, base: str, **settings: Any) -> tuple[list[Any], Any]:
    """``/moved`` through the proxy at ``address``, with no ``Retry`` to hide a failed hop."""
    engine = Engine(Settings(**settings), middlewares=[UserAgent(), Proxy([f"http://{address}"])])
    items, stats = await collect(Pages, engine=engine, start_urls=[base + "/moved"])
    assert_accounted(stats)
    return items, stats


@pytest.mark.parametrize("keep_received", [False, True])
async def test_redirect_through_the_proxy(tmp_path: Path, keep_received: bool) -> None:
    # tinyproxy closes the client's connection after each answer without saying so: the next hop,
    # sent at once on that connection, is sent once more on another
    async with tinyproxy(tmp_path) as (address, log), serve(Closing().app()) as base:
        items, stats = await crawl_redirect(address, base, keep_received=keep_received)
    assert items == [{"title": "there"}] and stats.requests_failed == 0 and stats.retries == 0
    assert f"GET {base}/moved " in log.read_text() and f"GET {base}/there " in log.read_text()


async def test_https_redirect_through_the_proxy_tunnel(tmp_path: Path) -> None:
    runner = web.AppRunner(Closing().app())
    await runner.setup()
    port = await tls_site(runner, tmp_path)
    try:
        async with tinyproxy(tmp_path) as (address, log):
            items, stats = await crawl_redirect(address, f"https://127.0.0.1:{port}", verify_tls=False)
    finally:
        await runner.cleanup()
    assert items == [{"title": "there"}] and stats.requests_failed == 0 and stats.retries == 0
    assert f"CONNECT 127.0.0.1:{port}" in log.read_text()


async def tls_site(runner: web.AppRunner, tmp_path: Path) -> int:
    """Serve ``runner``'s app over TLS (a self-signed certificate) on a port the system picks as it binds
    (a port found free first can be taken before the bind, by a suite running beside): the port."""
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self_signed(tmp_path)).start()
    port: int = runner.addresses[0][1]
    return port


class Local(Spider):
    name = "local"


async def test_a_connection_closed_under_a_request_is_resent_once_and_only_if_safe() -> None:
    site = Closing()
    fetcher = PlainFetcher()
    await fetcher.open(Local(), Settings())
    try:
        async with serve(site.app()) as base:
            response = await fetcher.fetch(Request(base + "/moved"))  # no proxy: the site closes too
            assert response.status == 200 and response.url == base + "/there"
            assert site.served == ["/moved", "/there"] and fetcher.resent == 1  # /there met a closed one
            await asyncio.gather(*(fetcher.fetch(Request(f"{base}/pair/{n}")) for n in range(3)))
            # three kept-alive connections in the pool, each to be closed on reading its next request
            with pytest.raises(ConnectionLost):  # a POST is never sent again (its bytes may have been read)
                await fetcher.fetch(Request(base + "/lost/post", method="POST", body=b"x"))
            with pytest.raises(ConnectionLost):  # a GET goes once more, and only once (both reused)
                await fetcher.fetch(Request(base + "/lost/get"))
            assert site.served.count("/lost/post") == 1 and site.served.count("/lost/get") == 2
            assert fetcher.resent == 2
            with pytest.raises(ConnectionLost):  # a fresh connection closed: the Retry middleware's, not ours
                await fetcher.fetch(Request(base + "/lost/fresh"))
            assert site.served.count("/lost/fresh") == 1 and fetcher.resent == 2
    finally:
        await fetcher.close()
