"""SOCKS4/5 proxies through real SOCKS servers (microsocks, dante), in the same rotation and
health checks as HTTP proxies, credentials never shown; and per-request timeouts.

The site is a radio station's programme: Latin-1 pages (declared in the header only),
a ``<table>`` of shows per day, one show page per row, and one day that never answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import ConfigError, Engine, Request, Response, Settings, Spider
from eclaw.middlewares import Proxy, Retry, UserAgent
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, read_jsonl, record_file
from tests.proxies import socks_server, tinyproxy

SECRET = "s0cks-Passw0rd"
DAYS = ["lundi", "mardi", "mercredi", "jeudi", "vendredi"]


def shows(day: str) -> list[str]:
    return [f"{day}-{hour:02d}h" for hour in range(6, 10)]


def programme() -> web.Application:
    async def day(request: web.Request) -> web.Response:
        name = request.match_info["day"]
        if name == "dimanche":  # the station is off the air: no answer at all
            await asyncio.sleep(30)
        rows = "".join(f"<tr><td><a href='/show/{show}'>Émission {show}</a></td></tr>" for show in shows(name))
        body = f"<html><body><h1>Programme du {name}</h1><table>{rows}</table></body></html>"
        return web.Response(body=body.encode("latin-1"), headers={"Content-Type": "text/html; charset=ISO-8859-1"})

    async def show(request: web.Request) -> web.Response:
        slug = request.match_info["slug"]
        body = f"<html><body><h2>Émission « {slug} »</h2><p class=host>Présentée par Zoé</p></body></html>"
        return web.Response(body=body.encode("latin-1"), headers={"Content-Type": "text/html; charset=ISO-8859-1"})

    app = web.Application()
    app.router.add_get("/day/{day}", day)
    app.router.add_get("/show/{slug}", show)
    return app


class Radio(Spider):
    name = "radio"

    def parse(self, response: Response) -> Iterator[Any]:
        yield from response.follow_all(css="table a", callback=self.parse_show)

    def parse_show(self, response: Response) -> Iterator[dict[str, str]]:
        yield {"show": response.url.rsplit("/", 1)[1], "host": response.css(".host::text").get("")}


def everything() -> list[str]:
    return sorted(show for day in DAYS for show in shows(day))


async def crawl(base: str, proxies: list[str], **settings: Any) -> tuple[list[Any], Any]:
    proxy = Proxy(proxies, max_failures=1, cooldown=60)
    engine = Engine(Settings(**settings), middlewares=[Retry(3, base=0.01), UserAgent(), proxy])
    items, stats = await collect(Radio, engine=engine, start_urls=[f"{base}/day/{day}" for day in DAYS])
    assert_accounted(stats)
    return items, stats


def assert_secret_kept(caplog: pytest.LogCaptureFixture, stats: Any) -> None:
    failures = Path(record_file("radio", "failures"))
    shown = caplog.text + repr(stats.as_dict()) + (failures.read_text() if failures.exists() else "")
    assert SECRET not in shown and "s0cks" not in shown


async def test_socks5_with_a_password_carries_the_whole_crawl(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with socks_server(tmp_path, auth=("zoe", SECRET)) as (address, log), serve(programme()) as base:
        items, stats = await crawl(base, [f"socks5://zoe:{SECRET}@{address}"])
        carried = log.read_text()
    assert sorted(i["show"] for i in items) == everything()
    assert {i["host"] for i in items} == {"Présentée par Zoé"}  # Latin-1 decoded through the tunnel
    assert stats.counters[f"proxy {address} ok"] == len(DAYS) + len(everything())
    port = base.rsplit(":", 1)[1]
    assert carried.count(f"connected to 127.0.0.1:{port}") >= 1  # the SOCKS server opened the connections
    assert_secret_kept(caplog, stats)


async def test_socks5h_resolves_names_on_the_proxy_and_socks5_here(tmp_path: Path) -> None:
    async with socks_server(tmp_path) as (address, log), serve(programme()) as base:
        by_name = base.replace("127.0.0.1", "localhost")
        remote, _ = await crawl(by_name, [f"socks5h://{address}"])
        seen_remote = log.read_text()
        log.write_text("")
        local, _ = await crawl(by_name, [f"socks5://{address}"])
        seen_local = log.read_text()
    assert len(remote) == len(local) == len(everything())
    port = base.rsplit(":", 1)[1]
    assert f"connected to localhost:{port}" in seen_remote  # the name went to the proxy
    assert "localhost" not in seen_local and f"connected to 127.0.0.1:{port}" in seen_local


async def test_socks4_through_dante(tmp_path: Path) -> None:
    async with socks_server(tmp_path, kind="dante") as (address, log), serve(programme()) as base:
        items, stats = await crawl(base.replace("127.0.0.1", "localhost"), [f"socks4://{address}"])
        carried = log.read_text()
    assert sorted(i["show"] for i in items) == everything()
    assert stats.counters[f"proxy {address} ok"] == len(DAYS) + len(everything())
    assert "connect" in carried  # dante logged the connections it passed


async def test_a_wrong_password_benches_the_socks_proxy_and_http_takes_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with (
        socks_server(tmp_path, auth=("zoe", "the-right-one")) as (socks, _),
        tinyproxy(tmp_path) as (http, proxied),
        serve(programme()) as base,
    ):
        items, stats = await crawl(base, [f"socks5://zoe:{SECRET}@{socks}", f"http://{http}"])
        through_http = proxied.read_text()
    assert sorted(i["show"] for i in items) == everything()  # one rotation: the HTTP proxy did the rest
    assert stats.counters[f"proxy {socks} failed"] >= 1 and stats.counters[f"proxy {socks} benched"] >= 1
    assert f"GET {base}/show/" in through_http
    assert_secret_kept(caplog, stats)


async def test_a_dead_socks_proxy_fails_cleanly_when_it_is_the_only_one(tmp_path: Path) -> None:
    async with serve(programme()) as base:
        engine = Engine(Settings(retries=1, proxies="socks5://127.0.0.1:9"))
        items, stats = await collect(Radio, engine=engine, start_urls=[f"{base}/day/lundi"])
    assert items == [] and stats.requests_failed == 1
    failure = read_jsonl(Path(record_file("radio", "failures")))[0]
    assert failure["reason"] == "proxy error" and "127.0.0.1:9" in failure["error"]


def test_bad_socks_proxy_urls_are_one_line() -> None:
    for url, fragment in [
        ("socks6://127.0.0.1:1080", "socks6 proxies are not supported"),
        ("127.0.0.1:1080", "no scheme"),
    ]:
        with pytest.raises(ConfigError, match=fragment):
            Proxy([url])


class Timed(Radio):
    """Sunday's programme must answer within 0.3 s; the other days have the crawl's timeout."""

    async def start_requests(self) -> AsyncIterator[Request]:
        for day in [*DAYS, "dimanche"]:
            meta = {"download_timeout": 0.3} if day == "dimanche" else {}
            yield Request(f"{self.base}/day/{day}", meta=meta)


class TimedImpersonating(Timed):
    fetcher = "impersonate"


@pytest.mark.parametrize(
    ("spider", "proxied"), [(Timed, False), (Timed, True), (TimedImpersonating, True)], ids=["direct", "socks5", "curl"]
)
async def test_a_per_request_timeout_fails_that_request_alone(
    tmp_path: Path, spider: type[Timed], proxied: bool
) -> None:
    async with socks_server(tmp_path) as (address, log), serve(programme()) as base:
        settings = Settings(retries=0, timeout=20, proxies=f"socks5://{address}" if proxied else "")
        started = asyncio.get_running_loop().time()
        items, stats = await collect(spider, engine=Engine(settings), base=base)
        carried = log.read_text()
        took = asyncio.get_running_loop().time() - started
    assert sorted(i["show"] for i in items) == everything()
    assert stats.failed_by_reason == {"timeout": 1}
    assert took < 10  # not the crawl's 20 s, nor the station's 30 s
    assert ("connected to" in carried) is proxied
    assert_accounted(stats)
