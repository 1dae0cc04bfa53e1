"""The no-framework floor of the broad crawl: aiohttp + lxml + a set + a heap, written for speed.

    python bench/contenders/broad_baseline.py SEEDS OUT.jsonl CONCURRENCY PER_HOST DELAY

It keeps the rules the benchmark holds every crawler to (at most PER_HOST connections to a host,
DELAY seconds from a host's answer to its next request, at most CONCURRENCY in flight, every link
followed once) and nothing else: no retries, no Retry-After, no robots, no canonical form beyond
dropping fragments, no accounting, no spill to disk (every pending URL in memory). What it costs
a page at 10,000 hosts against one host is what the hosts cost an HTTP client and an event loop,
with no frontier to speak of. Tuned as eclaw is: the cycle collector's young generation every
20,000 allocations, aiohttp's silent re-send on a dropped keep-alive connection off (it breaks the
delay), same-host links joined without parsing.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import json
import signal
import sys
from collections import deque
from typing import IO
from urllib.parse import urljoin

import aiohttp
from lxml import etree

PARSER = etree.HTMLParser()
TITLE = etree.XPath("string(//h1)")
HREFS = etree.XPath("//a/@href", smart_strings=False)  # plain strings: a smart one keeps its whole page alive


class Host:
    __slots__ = ("busy", "next", "queue", "ready")

    def __init__(self) -> None:
        self.queue: deque[str] = deque()
        self.busy = 0  # requests in flight
        self.next = 0.0  # when the next request may start
        self.ready = False  # in the heap


class Crawl:
    def __init__(self, out: IO[str], concurrency: int, per_host: int, delay: float) -> None:
        self.out, self.concurrency, self.per_host, self.delay = out, concurrency, per_host, delay
        self.hosts: dict[str, Host] = {}
        self.heap: list[tuple[float, int, str]] = []  # (when ready, tie, host)
        self.seen: set[str] = set()
        self.in_flight = 0
        self.tie = 0
        self.tasks: set[asyncio.Task[None]] = set()  # the loop keeps only weak references
        self.timer: asyncio.TimerHandle | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.session: aiohttp.ClientSession | None = None
        self.stopping = False

    def add(self, url: str, netloc: str = "") -> None:
        if url in self.seen:
            return
        self.seen.add(url)
        netloc = netloc or url.split("/", 3)[2]  # http://NETLOC/...
        host = self.hosts.get(netloc) or self.hosts.setdefault(netloc, Host())
        host.queue.append(url)
        self._offer(netloc, host)

    def _offer(self, netloc: str, host: Host) -> None:
        if host.queue and not host.ready and host.busy < self.per_host:
            host.ready = True
            self.tie += 1
            heapq.heappush(self.heap, (host.next, self.tie, netloc))

    def pump(self) -> None:
        """Start every request whose host is ready, as far as the concurrency allows; set a timer
        for the next host to become ready; end the crawl when nothing is left."""
        loop = asyncio.get_running_loop()
        now, heap = loop.time(), self.heap
        if self.stopping:
            return
        while heap and self.in_flight < self.concurrency and heap[0][0] <= now:
            netloc = heapq.heappop(heap)[2]
            host = self.hosts[netloc]
            if host.next > now:  # answered since it was queued (more than one connection a host): later
                self.tie += 1
                heapq.heappush(heap, (host.next, self.tie, netloc))
                continue
            host.ready = False
            host.busy += 1
            self.in_flight += 1
            task = loop.create_task(self.fetch(netloc, host, host.queue.popleft()))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            self._offer(netloc, host)
        if heap and self.in_flight < self.concurrency:
            when = heap[0][0]
            if self.timer is None or self.timer.when() > when:
                if self.timer is not None:
                    self.timer.cancel()
                self.timer = loop.call_at(when, self._tick)
        elif not heap and not self.in_flight and not self.done.done():
            self.done.set_result(None)

    def _tick(self) -> None:
        self.timer = None
        self.pump()

    def stop(self) -> None:
        """The benchmark's SIGINT: start nothing more and end (what is in flight is cancelled)."""
        self.stopping = True
        if self.timer is not None:
            self.timer.cancel()
        if not self.done.done():
            self.done.set_result(None)

    async def fetch(self, netloc: str, host: Host, url: str) -> None:
        assert self.session is not None
        try:
            async with self.session.get(url, allow_redirects=False) as response:
                body = await response.read()
                ok = response.status == 200
            if ok:
                self.parse(url, netloc, body)
        except (aiohttp.ClientError, TimeoutError):
            pass  # no retries: the floor
        finally:
            host.next = asyncio.get_running_loop().time() + self.delay  # from the answer: never early
            host.busy -= 1
            self.in_flight -= 1
            self._offer(netloc, host)
            self.pump()

    def parse(self, url: str, netloc: str, body: bytes) -> None:
        doc = etree.fromstring(body, PARSER)
        self.out.write(json.dumps({"url": url, "title": TITLE(doc)}) + "\n")
        origin = url[: url.index("/", 8)] if url.count("/") > 2 else url
        for href in HREFS(doc):
            href = href.partition("#")[0]
            if href.startswith(("http://", "https://")):
                self.add(href)
            elif href.startswith("/") and not href.startswith("//"):
                self.add(origin + href, netloc)  # the same host: no parsing
            else:
                link = urljoin(url, href)
                if link.startswith(("http://", "https://")):
                    self.add(link)


async def main(seeds: str, out: str, concurrency: int, per_host: int, delay: float) -> None:
    loop = asyncio.get_running_loop()
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=per_host)
    timeout = aiohttp.ClientTimeout(total=15)
    with open(out, "w", encoding="utf-8") as sink:  # noqa: ASYNC230 - plain buffered writes, as any script does
        crawl = Crawl(sink, concurrency, per_host, delay)
        loop.add_signal_handler(signal.SIGINT, crawl.stop)  # the benchmark's stop: keep what was written
        with open(seeds, encoding="utf-8") as lines:  # noqa: ASYNC230
            for line in lines:
                if line.strip():
                    crawl.add(line.strip())
        gc.freeze()  # as eclaw's crawl command: start-up's objects out of collections, young ones every 20,000
        gc.set_threshold(20000, *gc.get_threshold()[1:])
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as crawl.session:
            crawl.session._retry_connection = False  # aiohttp sends again at once on a dropped keep-alive: impolite
            crawl.pump()
            await crawl.done
            for task in crawl.tasks:
                task.cancel()
            await asyncio.gather(*crawl.tasks, return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])))
