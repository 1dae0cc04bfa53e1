"""No wake of a worker's frontier is lost while it asks Redis for work (issue 41).

Two workers on one host with a politeness delay stopped now and then with requests leased and
nothing in flight: a request waiting out its host's delay fell due while ``next_request`` had a
LEASE out; its wake came while the crawl's loop was inside that very call (the loop clears its
wake-up after pumping), and the LEASE came back empty, so ``next_request`` said "nothing" and no
one asked again. Here Redis holds the LEASE (``CLIENT PAUSE WRITE``) until the interleaving is in
place, so each test fails on the old code every time, with no timing luck."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
from redis.asyncio import Redis

from eclaw import Request, Settings, Spider
from eclaw.cluster import lua
from eclaw.cluster.frontier import RedisFrontier
from eclaw.cluster.waits import Waits
from tests.cluster.servers import RedisServer, redis_server
from tests.conftest import until

DELAY = 0.5  # the host's politeness delay, seconds


class Polite(Spider):
    name = "missed-wakes"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as running:
        yield running


@pytest.fixture
async def control(server: RedisServer) -> AsyncIterator[Redis]:
    client = Redis.from_url(server.url, decode_responses=True)
    await client.flushall()
    try:
        yield client
    finally:
        await client.client_unpause()  # a failed test must not leave the server paused for the next
        await client.aclose()


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``check`` until it holds (30 s bound: it only bounds a failure)."""
    async with asyncio.timeout(30):
        while not await check():  # noqa: ASYNC110  # a state in Redis: no event to wait on
            await asyncio.sleep(0.01)


async def postponed(control: Redis, count: int) -> bool:
    """``count`` calls of other clients wait for the paused server."""
    return int((await control.info("clients"))["blocked_clients"]) >= count


async def opened(server: RedisServer, name: str, woken: list[None]) -> RedisFrontier:
    """A worker's frontier with its heartbeat stopped: no heartbeat rescues a missed wake here."""
    frontier = RedisFrontier(server.url, worker=name)
    settings = Settings(concurrency=4, concurrency_per_domain=4, download_delay=DELAY)
    await frontier.open(Polite(), settings, lambda: woken.append(None))
    assert frontier._beat is not None
    frontier._beat.cancel()
    return frontier


async def test_a_request_falling_due_during_an_empty_lease_is_handed_out(server: RedisServer, control: Redis) -> None:
    woken: list[None] = []
    frontier = await opened(server, "only", woken)
    try:
        for attempt in range(5):  # a fresh host an attempt: another if the machine stalled for DELAY
            url = f"http://h{attempt}.test/page"
            # a request to the host was just sent (PACE): the next may start only DELAY from now
            await control.eval(lua.PACE, 1, f"{frontier.prefix}next:h{attempt}.test", int(DELAY * 1000))
            await frontier.enqueue([Request(url)])
            if await frontier.next_request() is not None or len(frontier._waits) != 1:
                continue  # leased, but not waiting out the delay
            await control.publish(frontier.prefix + "events", "work")  # another worker said: work queued
            await until(lambda: frontier.counts[0] > 0)
            await control.client_pause(60_000, all=False)  # scripts wait; INFO and UNPAUSE do not
            before = len(woken)
            asking = asyncio.create_task(frontier.next_request())
            await eventually(lambda: postponed(control, 1))
            if len(frontier._waits) != 1:  # the request fell due before the call: what Redis holds is no LEASE
                await control.client_unpause()
                await asking
                continue
            await until(lambda: len(woken) > before)  # noqa: B023  # its timer went off: the request is due, the LEASE still out
            await control.client_unpause()
            taken = await asking  # the LEASE comes back empty
            assert taken is not None and taken.url == url  # it used to say "nothing", and no one asked again
            return
        pytest.fail("the machine stalled for the host's delay five times: the interleaving was never set up")
    finally:
        await frontier.close()


async def test_work_announced_while_a_lease_is_out_is_looked_for(server: RedisServer, control: Redis) -> None:
    """A "work" message heard before the reply of a LEASE that Redis ran before that work was queued:
    the LEASE's "nothing queued" must not erase it (the worker idled until its next heartbeat)."""
    frontier = await opened(server, "taker", [])
    other = await opened(server, "giver", [])
    try:
        await control.client_pause(60_000, all=False)
        frontier.counts = (1, 0, 1)  # as a "work" message left it: worth a LEASE
        asking = asyncio.create_task(frontier.next_request())
        await eventually(lambda: postponed(control, 1))
        giving = asyncio.create_task(other.enqueue([Request("http://g.test/page")]))  # after the LEASE, in Redis
        await eventually(lambda: postponed(control, 2))
        frontier._heard("work")  # its message, delivered before the LEASE's reply
        await control.client_unpause()
        assert await giving == [None]
        taken = await asking
        assert taken is not None and taken.url == "http://g.test/page"
    finally:
        await other.close()
        await frontier.close()


async def test_each_delayed_request_has_a_timer_when_its_turn_comes() -> None:
    """Two requests waiting out their host's delay, due 0.05 s and 0.5 s from now: the timer of the
    first must not be the last (the second used to wait for an unrelated wake-up, maybe for ever)."""
    loop = asyncio.get_running_loop()
    for _ in range(5):  # another try if the machine stalled past the second's time
        wakes: list[float] = []
        waits = Waits(lambda: wakes.append(loop.time()))  # noqa: B023  # this try's list
        first, second = Request("http://a.test/1"), Request("http://a.test/2")
        waits.delayed(first, loop.time() + 0.05)
        waits.delayed(second, loop.time() + 0.5)
        await until(lambda: bool(wakes))  # noqa: B023
        if waits.ready(loop.time()) is not first or waits.ready(loop.time()) is not None:
            waits.clear()
            continue
        await until(lambda: len(wakes) == 2, deadline=10)  # noqa: B023
        assert waits.ready(loop.time()) is second
        waits.clear()
        return
    pytest.fail("the machine stalled for 0.45 s five times: the interleaving was never set up")
