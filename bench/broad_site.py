"""The broad-crawl benchmark's site: thousands of hosts on loopback addresses, served by one
asyncio process.

    python -m bench.broad_site --mode broad --hosts 1000 --seed 1 --port PORT --log FILE

Host ``i`` is ``http://<address(i)>:PORT/``: the whole of 127.0.0.0/8 is loopback on Linux, so
every host is a distinct address with no DNS, and the server (listening on 0.0.0.0, refusing any
peer outside 127/8) tells the host from the local address a connection came in on.

Everything is a function of ``(mode, hosts, seed)``, so both contenders see the same site and the
benchmark knows what to expect. Modes:

* ``broad``: per host a latency drawn from a log-normal (median 100 ms, clipped to 20-800 ms),
  1 % slow hosts (3 s, longer than the download delay), 1 % answering 503 to everything, 1 %
  resetting every connection, 3 % answering 429 with ``Retry-After: 3`` to the first request of
  each page; sizes: 2 % large (1,000-5,000 pages), 48 % medium (100-1,000: busy for a whole
  window at one page per 2 s), 50 % a long tail of 1-10 pages. Page ``k`` of a host links to
  its children ``20k+1 .. 20k+20`` (so a host's pages are always known well ahead of its
  politeness delay), 4 random pages of its own and 3 pages of other healthy hosts. The seeds are
  every host's home page.
* ``single``: one host of ``--pages`` pages, no latency, no faults (the single-host reference).
* ``merged``: the ``broad`` site's pages, links and faults served as one host (host 0's address,
  host ``i``'s page ``k`` at ``/h/i/p/k``), with no latency: what the broad site's pages cost a
  crawler without its many hosts.
* ``idle``: every host has one page linking to the home page of host ``i + CHAINS``; the seeds
  are the first ``CHAINS`` hosts. Hosts are visited once and then stay idle: the memory probe.

Each answered request is logged (arrival, end, host, page, status) in memory and written to
``--log`` on SIGTERM, with the server's own loop lag (it must not be the bottleneck).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import math
import random
import signal
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

FANOUT = 20  # children per page: a host's next pages are known long before its delay ends
CHAINS = 100  # idle mode: chains of hosts crawled side by side
RETRY_AFTER = 3  # seconds, in every 429
WORDS = ["alpha", "bravo", "delta", "echo", "gamma", "kilo", "lima", "metro", "nova", "oscar", "polar", "radio"]


@dataclass(frozen=True, slots=True)
class Host:
    """One host of the site: its index, page count, latency (seconds) and fault."""

    index: int
    pages: int
    latency: float
    fault: str = ""  # "" (healthy), "429" (first request of each page), "503" or "reset" (every request)

    @property
    def healthy(self) -> bool:
        """Its pages can be crawled (a 429 is retried); 503 and reset hosts give nothing."""
        return self.fault in ("", "429")


def address(i: int) -> str:
    """The loopback address of host ``i`` (127.0.0.1 is left out: it is no host of the site)."""
    return f"127.{1 + i // 62500}.{(i // 250) % 250 + 1}.{i % 250 + 1}"


def name(i: int) -> str:
    """The DNS name of host ``i`` (``--names``: a name server maps it to :func:`address`)."""
    return f"h{i}.broad.test"


def host_index(addr: str) -> int | None:
    """The inverse of :func:`address` (and of :func:`name`); ``None`` for an address no host has."""
    if addr.endswith(".broad.test"):
        index = addr.removesuffix(".broad.test").removeprefix("h")
        return int(index) if index.isdigit() else None
    parts = addr.split(".")
    if len(parts) != 4 or parts[0] != "127":
        return None
    a, b, c = (int(p) for p in parts[1:])
    if a < 1 or not 1 <= b <= 250 or not 1 <= c <= 250:
        return None
    return (a - 1) * 62500 + (b - 1) * 250 + (c - 1)


def path(page: int) -> str:
    return "/" if page == 0 else f"/p/{page}"


def url(host: int, page: int, port: int, *, names: bool = False) -> str:
    return f"http://{name(host) if names else address(host)}:{port}{path(page)}"


def merged_path(host: int, page: int) -> str:
    """Where the ``merged`` site serves ``page`` of ``host``."""
    return f"/h/{host}{path(page)}"


def split_merged(target: bytes) -> tuple[int, bytes] | None:
    """The host and the path within it of a ``merged`` site's target (the inverse of :func:`merged_path`)."""
    _, h, host, rest = [*target.split(b"/", 3), b"", b""][:4]
    if h != b"h" or not host.isdigit():
        return None
    return int(host), b"/" + rest


def _log_uniform(rng: random.Random, low: float, high: float) -> int:
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))


def make_hosts(mode: str, count: int, seed: int, pages: int = 0) -> list[Host]:
    """The hosts of the site, deterministic from ``(mode, count, seed)``."""
    if mode == "single":
        return [Host(0, pages, 0.0)]
    if mode == "merged":
        return [Host(h.index, h.pages, 0.0, h.fault) for h in make_hosts("broad", count, seed)]
    rng = random.Random(f"{mode}/{count}/{seed}")
    hosts = []
    for i in range(count):
        latency = min(0.8, max(0.02, rng.lognormvariate(math.log(0.1), 0.9)))
        if mode == "idle":
            hosts.append(Host(i, 1, latency))
            continue
        size, kind = rng.random(), rng.random()
        if size < 0.02:
            n = _log_uniform(rng, 1000, 5000)
        elif size < 0.50:
            n = _log_uniform(rng, 100, 1000)
        else:
            n = rng.randint(1, 10)
        fault = ""
        if kind < 0.01:
            latency = 3.0
        elif kind < 0.02:
            fault, n = "503", 1
        elif kind < 0.03:
            fault, n = "reset", 1
        elif kind < 0.06:
            fault = "429"
        hosts.append(Host(i, n, latency, fault))
    return hosts


class Site:
    """The hosts, their links and their pages."""

    def __init__(self, mode: str, hosts: list[Host], port: int, *, names: bool = False) -> None:
        self.mode = mode
        self.hosts = hosts
        self.port = port
        self.names = names  # links and seeds name their hosts (h{i}.broad.test), for a crawl that resolves them
        self._healthy = [h.index for h in hosts if h.healthy]
        self._filler = [" ".join(random.Random(n).choices(WORDS, k=12)).capitalize() + ". " for n in range(64)]

    def seed_pages(self) -> list[tuple[int, int]]:
        """The (host, page) of each seed: every home page, or in idle mode the first of each chain."""
        count = min(CHAINS, len(self.hosts)) if self.mode == "idle" else len(self.hosts)
        return [(i, 0) for i in range(count)]

    def seeds(self) -> list[str]:
        if self.mode == "merged":
            return [url(0, 0, self.port).removesuffix("/") + merged_path(h, p) for h, p in self.seed_pages()]
        return [url(h, p, self.port, names=self.names) for h, p in self.seed_pages()]

    def links(self, host: int, page: int) -> list[tuple[int, int]]:
        """The (host, page) targets of the links on ``page`` of ``host``."""
        if self.mode == "idle":
            nxt = host + CHAINS
            return [(nxt, 0)] if nxt < len(self.hosts) else []
        n = self.hosts[host].pages
        rng = random.Random(host * 1_000_003 + page)
        targets = [(host, c) for c in range(page * FANOUT + 1, min(n, page * FANOUT + FANOUT + 1))]
        targets += [(host, rng.randrange(n)) for _ in range(4)]
        if self.mode in ("broad", "merged"):
            for _ in range(3):
                other = self.hosts[rng.choice(self._healthy)]
                targets.append((other.index, rng.randrange(other.pages)))
        return targets

    def render(self, host: int, page: int) -> bytes:
        rng = random.Random(-(host * 1_000_003 + page))
        anchors = []
        for h, p in self.links(host, page):
            if self.mode == "merged":
                href = merged_path(h, p)
            else:
                href = path(p) if h == host else url(h, p, self.port, names=self.names)
            anchors.append(f'<li><a href="{href}">page {p}</a></li>')
        filler = "".join(rng.choices(self._filler, k=rng.randint(30, 90)))
        return (
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Host {host}</title></head><body>"
            f"<h1>Host {host} page {page}</h1><p>{filler}</p><ul>{''.join(anchors)}</ul>"
            "<footer><a href='mailto:webmaster@example.invalid'>contact</a></footer></body></html>"
        ).encode()


def title(host: int, page: int) -> str:
    """The ``<h1>`` of a page: what a correct crawl extracts from it."""
    return f"Host {host} page {page}"


class _Connection(asyncio.Protocol):
    """One client connection: requests answered in order, each after its host's latency."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.buffer = b""
        self.waiting: deque[tuple[bytes, float]] = deque()
        self.busy = False
        self.transport: asyncio.Transport | None = None
        self.host: Host | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        local, peer = transport.get_extra_info("sockname")[0], transport.get_extra_info("peername")[0]
        index = host_index(local)
        if not peer.startswith("127.") or index is None or index >= len(self.server.site.hosts):
            transport.abort()  # not one of the site's hosts, or not from this machine
            return
        merged = self.server.site.mode == "merged"  # one host, at host 0's address: each request names its page
        if merged and index != 0:
            transport.abort()
            return
        self.host = Host(-1, 0, 0.0) if merged else self.server.site.hosts[index]
        self.server.connections += 1

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        now = time.monotonic()
        while b"\r\n\r\n" in self.buffer:
            head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
            self.waiting.append((head.split(b" ", 2)[1], now))
        self._next()

    def _next(self) -> None:
        if self.busy or not self.waiting or self.host is None:
            return
        self.busy = True
        target, arrived = self.waiting.popleft()
        asyncio.get_running_loop().call_later(self.host.latency, self._answer, target, arrived)

    def _answer(self, target: bytes, arrived: float) -> None:
        assert self.transport is not None and self.host is not None
        if self.transport.is_closing():
            return
        host = self.host
        if host.index < 0:  # the merged site: /h/HOST/...
            found = split_merged(target)
            hosts = self.server.site.hosts
            host = hosts[found[0]] if found and found[0] < len(hosts) else Host(-1, 0, 0.0)
            target = found[1] if found else target
        status, body, extra = self.server.respond(host, target.decode("latin-1"))
        self.server.answered(arrived, host.index, _page(target), status)
        if status == 0:
            self.transport.abort()
            return
        reason = {200: "OK", 404: "Not Found", 429: "Too Many Requests", 503: "Service Unavailable"}[status]
        head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n{extra}"
        self.transport.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        self.busy = False
        self._next()


def _page(target: bytes) -> int:
    if target == b"/":
        return 0
    tail = target.rpartition(b"/")[2]
    return int(tail) if target.startswith(b"/p/") and tail.isdigit() else -1


class Server:
    """Answers for every host of ``site`` and logs each request."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.log: list[tuple[float, float, int, int, int]] = []
        self._throttled: set[tuple[int, int]] = set()  # pages of 429 hosts asked once already
        self.lags: list[float] = []
        self.cpu = (0.0, 0.0)  # process time at the first and at the latest answer
        self.connections = 0  # connections from the crawler (one per host it visits, if it keeps them)

    def respond(self, host: Host, target: str) -> tuple[int, bytes, str]:
        """(status, body, extra header lines); status 0 means reset the connection."""
        if host.fault == "reset":
            return 0, b"", ""
        if host.fault == "503":
            return 503, b"busy", ""
        page = _page(target.encode("latin-1"))
        if not 0 <= page < host.pages:
            return 404, b"not found", ""
        if host.fault == "429" and (host.index, page) not in self._throttled:
            self._throttled.add((host.index, page))
            return 429, b"slow down", f"Retry-After: {RETRY_AFTER}\r\n"
        return 200, self.site.render(host.index, page), ""

    def answered(self, arrived: float, host: int, page: int, status: int) -> None:
        self.log.append((arrived, time.monotonic(), host, page, status))
        self.cpu = (self.cpu[0] or time.process_time(), time.process_time())

    async def watch_lag(self) -> None:
        """The server's own loop lag, sampled every 50 ms (a busy server shows it here first)."""
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.05)
            self.lags.append(loop.time() - before - 0.05)

    def write(self, log: Path) -> None:
        lags = sorted(self.lags) or [0.0]
        busy = self.cpu[1] - self.cpu[0]
        span = self.log[-1][1] - self.log[0][1] if self.log else 0.0
        p99 = lags[int(0.99 * (len(lags) - 1))]
        head = f"# lag_p99={p99:.6f} lag_max={lags[-1]:.6f} cpu={busy:.3f} span={span:.3f}"
        lines = [f"{head} connections={self.connections}"]
        lines += [f"{a:.6f} {e:.6f} {h} {p} {s}" for a, e, h, p, s in self.log]
        log.write_text("\n".join(lines) + "\n")


async def listen(site: Site) -> tuple[Server, asyncio.AbstractServer]:
    """Answer for every host of ``site`` on its port (0.0.0.0: all of 127/8 arrives there)."""
    server = Server(site)
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(functools.partial(_Connection, server), "0.0.0.0", site.port, backlog=4096)
    return server, listener


async def serve(site: Site, log: Path) -> None:
    """Serve until SIGTERM or SIGINT, then write the log."""
    server, listener = await listen(site)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    lag = asyncio.create_task(server.watch_lag())
    await stop.wait()
    lag.cancel()
    listener.close()
    server.write(log)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["broad", "single", "idle", "merged"], default="broad")
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=0, help="single mode: pages of the one host")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--names", action="store_true", help="link hosts by name (h{i}.broad.test), not address")
    args = parser.parse_args()
    site = Site(args.mode, make_hosts(args.mode, args.hosts, args.seed, args.pages), args.port, names=args.names)
    asyncio.run(serve(site, args.log))


if __name__ == "__main__":
    main()
