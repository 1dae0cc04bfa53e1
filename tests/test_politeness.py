"""Politeness as a site sees it: the delay between two requests to a host, measured at the server;
hosts whose requests went to disk still get their turn; connections of polite hosts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from eclaw import Request, Response, Settings, Spider
from eclaw.frontier.default import DefaultFrontier
from eclaw.testing import collect, serve
from tests.conftest import assert_spaced, until


class Register:
    """A parish register: an index of ``records`` entries, each a short Latin-1 page; the arrival time of
    every request is logged, and every connection the server sees is counted."""

    def __init__(self, records: int) -> None:
        self.records = records
        self.arrivals: list[tuple[float, str]] = []
        self.transports: list[asyncio.BaseTransport] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/entry/{n}", self._entry)
        return app

    def open_connections(self) -> int:
        return sum(not transport.is_closing() for transport in self.transports)

    def _log(self, request: web.Request) -> None:
        self.arrivals.append((time.monotonic(), request.path))
        if request.transport is not None and request.transport not in self.transports:
            self.transports.append(request.transport)

    async def _index(self, request: web.Request) -> web.Response:
        self._log(request)
        links = "".join(f'<li><a href="/entry/{n}">Baptême n° {n}</a></li>' for n in range(1, self.records + 1))
        body = f"<html><head><title>Registre</title></head><body><ol>{links}</ol></body></html>"
        return web.Response(body=body.encode("latin-1"), content_type="text/html", charset="iso-8859-1")

    async def _entry(self, request: web.Request) -> web.Response:
        self._log(request)
        n = request.match_info["n"]
        body = f"<html><head><title>Acte {n}</title></head><body><p>Né le {n} février</p></body></html>"
        return web.Response(body=body.encode("latin-1"), content_type="text/html", charset="iso-8859-1")


class Baptisms(Spider):
    name = "baptisms"

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="li a", callback=self.parse_entry)

    def parse_entry(self, response: Response) -> Any:
        yield {"title": response.css("title::text").get(), "text": response.css("p::text").get()}


async def slow_every_other(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """A middleware that sometimes takes longer than the delay before the request goes out (an
    authentication round trip, a robots.txt fetch): the delay must not count from before it."""
    if request.url.endswith(("1", "3", "5", "7")):
        await asyncio.sleep(0.2)
    return await call_next(request)


class SlowBaptisms(Baptisms):
    middlewares = (slow_every_other,)


@pytest.mark.parametrize("per_host", [1, 3])
async def test_delay_holds_at_the_server_with_requests_waiting_before_the_wire(per_host: int) -> None:
    site, delay = Register(records=8), 0.15
    async with serve(site.app()) as base:
        settings = Settings(download_delay=delay, concurrency_per_domain=per_host, retries=0)
        items, _ = await collect(SlowBaptisms, settings=settings, start_urls=[base + "/"])
    assert sorted(item["title"] for item in items) == [f"Acte {n}" for n in range(1, 9)]
    assert items[0]["text"].startswith("Né le")
    times = [t for t, _ in site.arrivals]
    assert len(times) == 9  # each page asked for once
    assert_spaced(times, delay)


class Watching(Baptisms):
    """Notes, as each entry is parsed, how many connections the register has open."""

    site: Register

    async def parse_entry(self, response: Response) -> AsyncIterator[dict[str, Any]]:
        title = response.css("title::text").get()
        if title == "Acte 3":  # the host's last request: wait for the server to hear of the close
            await until(lambda: not self.site.open_connections())
        else:  # requests queued: a close would come right after the answer, so 0.25 s is time enough to
            await asyncio.sleep(0.25)  # see one; the next page's request reusing the connection proves it kept
        yield {"title": title, "open": self.site.open_connections()}


async def test_connection_of_a_polite_host_is_closed_once_it_has_nothing_left() -> None:
    """Keeping a connection idle per host costs memory across thousands of hosts: a host with a delay and
    nothing queued has its connection closed after the answer; one with requests queued keeps it."""
    site = Register(records=3)
    async with serve(site.app()) as base:
        settings = Settings(download_delay=0.6, concurrency_per_domain=1)  # well over a parse
        items, _ = await collect(Watching, settings=settings, start_urls=[base + "/"], site=site)
    assert {item["title"]: item["open"] for item in items} == {"Acte 1": 1, "Acte 2": 1, "Acte 3": 0}
    # the home page was the host's only request when sent: its connection went; the entries shared one
    assert len(site.transports) == 2


class Site(Spider):
    name = "site"

    def parse(self, response: Response) -> Any:
        return None


async def test_a_host_whose_requests_went_to_disk_is_served_while_others_wait_out_their_delay() -> None:
    """300 hosts fill the in-memory window with two pages each, their third pages go to disk, and so
    does the only page of one more host. Once every host has had its first page, all of them wait out
    their delay: the last host is ready, and must be served then, not after the others' second pages."""
    frontier = DefaultFrontier()
    settings = Settings(frontier_memory=600, download_delay=0.3, concurrency_per_domain=1)
    await frontier.open(Site(), settings, lambda: None)
    try:
        hosts = [f"h{i}.example" for i in range(300)]
        for page in ("first", "second", "third"):
            await frontier.enqueue([Request(f"http://{h}/{page}") for h in hosts])
        await frontier.enqueue([Request("http://late.example/only")])
        order: list[str] = []
        deadline = time.monotonic() + 30  # generous: it only bounds a failure
        while "http://late.example/only" not in order and time.monotonic() < deadline:
            request = await frontier.next_request()
            if request is None:
                await asyncio.sleep(0.005)
                continue
            order.append(request.url)
            await frontier.release(request)
        assert "http://late.example/only" in order
        seconds = [url for url in order if not url.endswith("/first")]
        assert seconds == ["http://late.example/only"], f"{len(seconds) - 1} later pages went before the ready host"
        assert frontier.pending() == 600
    finally:
        await frontier.close()


async def test_a_host_that_came_late_is_not_starved_by_hosts_with_long_queues() -> None:
    """Four hosts with 30 pages each are back from their delay faster than the crawl can take them (as in
    a broad crawl short of CPU); a fifth host's only page arrives later. It must be served about as soon
    as the hosts ready before it, not after the old queues run dry."""
    frontier = DefaultFrontier()
    await frontier.open(Site(), Settings(download_delay=0.05, concurrency_per_domain=1), lambda: None)
    try:
        await frontier.enqueue([Request(f"http://big{i}.example/{n}") for n in range(30) for i in range(4)])
        order: list[str] = []
        deadline = time.monotonic() + 30  # generous: it only bounds a failure
        while "http://late.example/only" not in order and time.monotonic() < deadline:
            await asyncio.sleep(0.02)  # the crawl takes one page per tick: 50 a second, the hosts offer 80
            if len(order) == 10:
                await frontier.enqueue([Request("http://late.example/only")])
            request = await frontier.next_request()
            if request is not None:
                order.append(request.url)
                await frontier.release(request)
        assert "http://late.example/only" in order
        assert order.index("http://late.example/only") <= 10 + 4, order  # behind the four ready before it at most
    finally:
        await frontier.close()
