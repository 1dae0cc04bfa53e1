"""The caching resolver against a real local dnsmasq: cache, TTL, NXDOMAIN, sharing, bound."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from bench import dns_relay
from eclaw import Request, Spider
from eclaw.exceptions import DnsError
from eclaw.fetchers.dns import CachingResolver, connector_options
from eclaw.settings import Settings
from eclaw.testing import collect, serve

NAMES = {f"h{i}.test": f"127.0.0.{i + 2}" for i in range(8)}
SITES = {"a.test": "127.0.0.1", "b.test": "127.0.0.1"}  # served by a local site on 127.0.0.1


def _free_port() -> int:
    """A port free for both UDP and TCP now (dnsmasq binds both): another process may still take it
    before dnsmasq does, so :func:`dnsmasq` starts it again on another port if it exits."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, socket.socket() as tcp:
            udp.bind(("127.0.0.1", 0))
            port = int(udp.getsockname()[1])
            try:
                tcp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


class Dnsmasq:
    """A dnsmasq on 127.0.0.1 answering ``NAMES`` with TTL 1 s; NXDOMAIN for other ``.test``."""

    def __init__(self, tmp: Path) -> None:
        self.port = _free_port()
        self.log = tmp / "dnsmasq.log"
        hosts = tmp / "hosts"
        hosts.write_text("".join(f"{ip} {name}\n" for name, ip in {**NAMES, **SITES}.items()))
        self.proc = subprocess.Popen(
            ["dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts", "--no-daemon",
             f"--addn-hosts={hosts}", "--local=/test/", "--local-ttl=1", "--cache-size=0",
             "--listen-address=127.0.0.1", "--bind-interfaces", f"--port={self.port}",
             "--log-queries", f"--log-facility={self.log}", "--user=root", "--pid-file="],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def queries(self, name: str) -> int:
        """How many A queries for ``name`` the server has logged."""
        text = self.log.read_text() if self.log.exists() else ""
        return sum(1 for line in text.splitlines() if f"query[A] {name} " in line)


@pytest.fixture(scope="module")
def dnsmasq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dnsmasq]:
    if shutil.which("dnsmasq") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("dnsmasq is missing: apt-get install dnsmasq-base")
        pytest.skip("dnsmasq is not installed (apt-get install dnsmasq-base)")
    for _ in range(5):  # its port taken meanwhile by another process (three suites run side by side): again
        server = Dnsmasq(tmp_path_factory.mktemp("dns"))
        deadline = time.monotonic() + 30
        while server.proc.poll() is None and (not server.log.exists() or "started" not in server.log.read_text()):
            assert time.monotonic() < deadline, "dnsmasq did not start"
            time.sleep(0.05)
        if server.proc.poll() is None:
            break
    assert server.proc.poll() is None, "dnsmasq exited at start five times"
    yield server
    server.proc.terminate()
    server.proc.wait(10)


def _resolver(server: Dnsmasq, **options: float) -> CachingResolver:
    return CachingResolver(servers=[f"127.0.0.1:{server.port}"], **options)  # type: ignore[arg-type]


async def test_literals_and_localhost_need_no_query(dnsmasq: Dnsmasq) -> None:
    resolver = _resolver(dnsmasq)
    assert (await resolver.resolve("10.1.2.3", 80))[0]["host"] == "10.1.2.3"
    assert (await resolver.resolve("::1", 80))[0]["family"] == socket.AF_INET6
    assert (await resolver.resolve("localhost", 80))[0]["host"] == "127.0.0.1"
    assert resolver.queries == 0
    await resolver.close()


async def test_answer_is_cached_and_shared(dnsmasq: Dnsmasq) -> None:
    resolver = _resolver(dnsmasq, ttl_min=60)
    before = dnsmasq.queries("h0.test")
    answers = await asyncio.gather(*(resolver.resolve("h0.test", 80) for _ in range(20)))
    assert {a[0]["host"] for a in answers} == {"127.0.0.2"}
    assert (await resolver.resolve("H0.test", 80))[0]["host"] == "127.0.0.2"
    assert resolver.queries == 1
    assert dnsmasq.queries("h0.test") == before + 1
    await resolver.close()


async def test_cache_expires_with_the_ttl(dnsmasq: Dnsmasq) -> None:
    resolver = _resolver(dnsmasq, ttl_min=0, ttl_max=3600)
    await resolver.resolve("h1.test")
    await resolver.resolve("h1.test")
    assert resolver.queries == 1
    deadline = time.monotonic() + 10
    while resolver.queries == 1:  # the server's TTL is 1 s: an answer after it is a new query
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
        await resolver.resolve("h1.test")
    assert resolver.queries == 2
    await resolver.close()


async def test_nxdomain_fails_with_reason_dns_and_is_not_retried(dnsmasq: Dnsmasq) -> None:
    resolver = _resolver(dnsmasq, retries=3)
    with pytest.raises(DnsError) as info:
        await resolver.resolve("missing.test", 80)
    assert info.value.reason == "dns"
    assert resolver.queries == 1
    with pytest.raises(DnsError):  # negative cache: no second query
        await resolver.resolve("missing.test", 80)
    assert resolver.queries == 1
    await resolver.close()


async def test_lookups_in_flight_are_bounded(dnsmasq: Dnsmasq) -> None:
    resolver = _resolver(dnsmasq, max_in_flight=2)
    answers = await asyncio.gather(*(resolver.resolve(name) for name in NAMES))
    assert [a[0]["host"] for a in answers] == list(NAMES.values())
    assert resolver.peak_in_flight <= 2
    assert resolver.queries == len(NAMES)
    await resolver.close()


async def test_http_fetches_resolve_through_the_server(dnsmasq: Dnsmasq) -> None:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=request.host)

    app = web.Application()
    app.router.add_get("/{n}", page)
    settings = Settings(store="", dns_resolver="async", dns_servers=f"127.0.0.1:{dnsmasq.port}", dns_cache_ttl_min=60)
    options = connector_options(settings)
    resolver = options["resolver"]
    async with serve(app) as base:
        port = base.rsplit(":", 1)[1].rstrip("/")
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True, **options)) as session:
            for n in range(3):
                for name in SITES:
                    async with session.get(f"http://{name}:{port}/{n}") as response:
                        assert await response.text() == f"{name}:{port}"
            with pytest.raises(DnsError):
                await session.get(f"http://nowhere.test:{port}/")
    assert {name: dnsmasq.queries(name) for name in SITES} == {"a.test": 1, "b.test": 1}
    assert resolver.queries == len(SITES) + 1
    await resolver.close()


async def test_prefetch_warms_the_cache_without_waiting(dnsmasq: Dnsmasq) -> None:
    resolver = _resolver(dnsmasq, ttl_min=60)
    woken = asyncio.Event()
    assert resolver.prefetch("127.0.0.5", woken.set) and resolver.prefetch("localhost", woken.set)
    assert not resolver.prefetch("h2.test", woken.set)  # not known yet: the caller keeps the host back
    assert not resolver.prefetch("missing.test", lambda: None)
    await asyncio.wait_for(woken.wait(), 10)
    assert resolver.prefetch("h2.test", woken.set)  # now answered from the cache, no second query
    assert (await resolver.resolve("h2.test"))[0]["host"] == "127.0.0.4"
    assert resolver.queries <= 2  # h2.test once, and missing.test once if it has settled
    deadline = time.monotonic() + 10
    while not resolver.prefetch("missing.test", lambda: None):  # a failure is cached too
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    assert resolver.queries == 2
    await resolver.close()


class Named(Spider):
    """Three pages on each of the two named hosts, and one on a name that does not exist."""

    name = "named"

    def __init__(self, port: str = "", **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.port = port

    async def start_requests(self):  # type: ignore[no-untyped-def]
        for n in range(3):
            for host in SITES:
                yield Request(f"http://{host}:{self.port}/{n}")
        yield Request(f"http://nowhere.test:{self.port}/")

    def parse(self, response):  # type: ignore[no-untyped-def]
        yield {"host": response.text}


async def test_a_crawl_resolves_its_hosts_through_the_async_resolver(dnsmasq: Dnsmasq, tmp_path: Path) -> None:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=request.host)

    app = web.Application()
    app.router.add_get("/{n}", page)
    app.router.add_get("/", page)
    settings = Settings(
        store="", dns_resolver="async", dns_servers=f"127.0.0.1:{dnsmasq.port}", dns_cache_ttl_min=60,
        failures=str(tmp_path / "failures.jsonl"), retries=2,
    )  # fmt: skip
    before = {name: dnsmasq.queries(name) for name in [*SITES, "nowhere.test"]}
    async with serve(app) as base:
        port = base.rsplit(":", 1)[1].rstrip("/")
        items, stats = await collect(Named, settings=settings, port=port)
    assert sorted(item["host"] for item in items) == sorted(f"{h}:{port}" for h in SITES for _ in range(3))
    assert stats.failed_by_reason == {"dns": 1} and stats.retries == 0  # a name that does not exist: not retried
    after = {name: dnsmasq.queries(name) - before[name] for name in before}
    assert after["nowhere.test"] == 1 and all(after[h] <= 1 for h in SITES)  # the crawl's cache: once each


class OneSlot(Spider):
    """A page on a name whose answer the relay holds back, then five on an address (no lookup)."""

    name = "one_slot"
    custom_settings = {"concurrency": 1}

    def __init__(self, port: str = "", **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.port = port

    async def start_requests(self):  # type: ignore[no-untyped-def]
        yield Request(f"http://a.test:{self.port}/slow")
        for n in range(5):
            yield Request(f"http://127.0.0.1:{self.port}/{n}")

    def parse(self, response):  # type: ignore[no-untyped-def]
        yield {"url": response.url}


async def test_a_name_being_looked_up_holds_no_download_slot(dnsmasq: Dnsmasq, tmp_path: Path) -> None:
    """With one download slot, a host whose name is slow to resolve waits aside: the relay answers
    a.test only once the site has served the five other pages (or after 20 s: then this fails)."""
    served: list[str] = []
    others_served = asyncio.Event()

    async def page(request: web.Request) -> web.Response:
        served.append(request.path)
        if sum(path != "/slow" for path in served) == 5:
            others_served.set()
        return web.Response(text="ok")

    async def hold(name: str) -> None:
        if name == "a.test":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(others_served.wait(), 20)

    app = web.Application()
    app.router.add_get("/{n}", page)
    relay = await dns_relay.start(0, ("127.0.0.1", dnsmasq.port), hold)
    settings = Settings(store="", dns_resolver="async", dns_servers=f"127.0.0.1:{relay.port}", dns_cache_ttl_min=60)
    try:
        async with serve(app) as base:
            port = base.rsplit(":", 1)[1].rstrip("/")
            items, stats = await collect(OneSlot, settings=settings, port=port)
    finally:
        await relay.close()
    assert len(items) == 6 and not stats.failed_by_reason
    assert served[-1] == "/slow"  # the five on 127.0.0.1 went first, while a.test was being looked up
    assert relay.asked.count("a.test") == 1


async def test_closing_the_resolver_ends_the_lookups_still_waiting(dnsmasq: Dnsmasq) -> None:
    """A crawl stopped mid-lookup: queued and in-flight lookups end as DnsError, none left behind."""
    resolver = _resolver(dnsmasq, max_in_flight=1)
    waiting = [asyncio.ensure_future(resolver.resolve(f"h{i}.test")) for i in range(6)]
    await asyncio.sleep(0)  # the lookups start: one in flight, five behind the bound
    await resolver.close()
    outcomes = await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), 30)
    assert all(isinstance(o, (DnsError, list)) for o in outcomes)
    assert any(isinstance(o, DnsError) for o in outcomes)
