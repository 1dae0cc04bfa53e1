"""A call whose reply is lost with its connection (Redis shutting down, a network cut) is sent again:
a LEASE sent again must give the requests the first one leased, not lease others and leave those to a
live worker that never heard of them (the crawl would then never end). Through a relay that drops one
reply, on a real redis-server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from redis.asyncio import Redis

from eclaw import Request, Settings, Spider
from eclaw.cluster.frontier import RedisFrontier
from tests.cluster.servers import redis_server


class Catalogue(Spider):
    name = "lost-replies"


class Relay:
    """A TCP relay to Redis that, once armed, passes the next script call on and drops the connection it
    came on as soon as Redis answers: the call ran, its caller never hears how."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.armed = False
        self.dropped = 0

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, doomed: list[bool]) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                if doomed[0]:
                    self.dropped += 1
                    break
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _client(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        redis_in, redis_out = await asyncio.open_connection("127.0.0.1", self.port)
        doomed = [False]

        async def upstream() -> None:
            with contextlib.suppress(ConnectionError):
                while data := await client_in.read(65536):
                    if self.armed and b"EVALSHA" in data:
                        self.armed, doomed[0] = False, True  # its answer will be dropped
                    redis_out.write(data)
                    await redis_out.drain()
            redis_out.close()

        await asyncio.gather(upstream(), self._pipe(redis_in, client_out, doomed))

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        async with server:
            yield f"redis://127.0.0.1:{server.sockets[0].getsockname()[1]}/0"


async def test_a_lease_sent_again_after_its_reply_was_lost_gets_what_the_first_leased(tmp_path: Path) -> None:
    settings = Settings(concurrency=8, concurrency_per_domain=8)
    with redis_server(tmp_path) as server:
        seeder = RedisFrontier(server.url, seed=True, worker="seed")
        await seeder.open(Catalogue(), settings, lambda: None)
        await seeder.enqueue([Request(f"http://127.0.0.1:1/{n}") for n in range(3)])
        await seeder.close()
        relay = Relay(server.port)
        async with relay.serving() as url:
            worker = RedisFrontier(url, seed=False, worker="w")
            await worker.open(Catalogue(), settings, lambda: None)
            try:
                relay.armed = True
                got = [await worker.next_request() for _ in range(3)]
                assert relay.dropped == 1  # the LEASE ran in Redis; its reply never reached the worker
                async with Redis.from_url(server.url) as client:
                    held = await client.zrange(worker.prefix + "leases:w", 0, -1)
                    queued = await client.zcard(worker.prefix + "queue")
                assert all(request is not None for request in got), got
                assert sorted(-request._id for request in got if request) == sorted(int(n) for n in held)
                assert queued == 0
            finally:
                await worker.close()
