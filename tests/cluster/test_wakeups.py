"""Workers tell each other at once (Redis pub/sub) that work has come or that the crawl is over,
rather than each finding out at its next heartbeat: heartbeats are stopped here, so only the
wake-ups can tell them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from redis.asyncio import Redis

from eclaw import Request, Settings, Spider
from eclaw.cluster.frontier import RedisFrontier
from tests.cluster.servers import RedisServer, redis_server


class Catalogue(Spider):
    name = "wakeups"


PROBE = "probe"  # a message of the test's own: once heard, every message published before it was heard


class Worker:
    """A frontier as one worker holds it, with its heartbeat stopped; ``woken`` is set when told, and
    ``heard`` lists each message its subscription delivered (a probe is listed, not passed on)."""

    def __init__(self, url: str, name: str) -> None:
        self.frontier = RedisFrontier(url, seed=False, worker=name)
        self.woken = asyncio.Event()
        self.heard: list[str] = []
        self.probed = asyncio.Event()
        passed_on = self.frontier._heard

        def heard(message: str) -> None:
            self.heard.append(message)
            if message == PROBE:
                self.probed.set()
            else:
                passed_on(message)

        self.frontier._heard = heard  # type: ignore[method-assign]  # read when open() subscribes

    async def open(self, settings: Settings) -> None:
        await self.frontier.open(Catalogue(), settings, self.woken.set)
        assert self.frontier._beat is not None
        self.frontier._beat.cancel()  # no heartbeats from here on
        self.woken.clear()

    async def told(self) -> None:
        await asyncio.wait_for(self.woken.wait(), 30)  # a generous bound: it only bounds a failure
        self.woken.clear()

    async def heard_since(self, url: str) -> list[str]:
        """What this worker heard from now until a probe published now comes back: Redis delivers a
        channel's messages in order, so the list holds every message published before this call."""
        before = len(self.heard)
        self.probed.clear()
        async with Redis.from_url(url) as client:
            await client.publish(self.frontier.prefix + "events", PROBE)
        await asyncio.wait_for(self.probed.wait(), 30)
        return self.heard[before : before + self.heard[before:].index(PROBE)]


@asynccontextmanager
async def two_workers(server: RedisServer) -> AsyncIterator[tuple[Worker, Worker]]:
    settings = Settings(concurrency=4, concurrency_per_domain=4)
    seeder = RedisFrontier(server.url, seed=True, worker="seed")
    await seeder.open(Catalogue(), settings, lambda: None)
    await seeder.enqueue([Request("http://127.0.0.1:1/start")])
    await seeder.close()
    first, second = Worker(server.url, "first"), Worker(server.url, "second")
    await first.open(settings)
    await second.open(settings)
    try:
        yield first, second
    finally:
        await second.frontier.close()
        await first.frontier.close()


async def test_an_idle_worker_hears_of_new_work_and_of_the_end(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        async with two_workers(server) as (first, second):
            start = await first.frontier.next_request()
            assert start is not None
            assert await second.frontier.next_request() is None  # nothing left: "second" idles
            assert second.frontier.pending() == 1  # ... while "first" holds the start page

            await first.frontier.enqueue([Request("http://127.0.0.1:1/a"), Request("http://127.0.0.1:1/b")])
            await second.told()  # the links landed in an empty queue
            link = await second.frontier.next_request()
            assert link is not None and link.url == "http://127.0.0.1:1/a"
            later = await first.frontier.next_request()
            assert later is not None and later.url == "http://127.0.0.1:1/b"

            await first.frontier.done(start)
            await first.frontier.done(later)
            assert await second.heard_since(server.url) == []  # "second" still holds /a: not the end
            assert not second.woken.is_set()
            await first.heard_since(server.url)  # "first" heard all said so far (its own links among it) ...
            first.woken.clear()  # ... so what wakes it next is the end, not a message heard late
            await second.frontier.done(link)  # the crawl's last lease
            await first.told()
            await second.told()
            assert first.frontier.pending() == 0 and second.frontier.pending() == 0


async def test_wake_ups_come_back_after_redis_restarts(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        async with two_workers(server) as (first, second):
            start = await first.frontier.next_request()
            assert start is not None and await second.frontier.next_request() is None
            server.stop()  # its append-only file keeps the frontier
            await asyncio.sleep(0.3)
            server.start()
            await second.told()  # subscribed again: it asks Redis at once, in case it missed something
            await first.frontier.enqueue([Request("http://127.0.0.1:1/after")])
            await second.told()
            taken = await second.frontier.next_request()
            assert taken is not None and taken.url == "http://127.0.0.1:1/after"
