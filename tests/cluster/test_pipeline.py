"""Redis calls made in one turn of the loop share one pipeline, against a real redis-server:
each caller gets its own results or its own error, and scripts Redis forgot are loaded and run once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from eclaw.cluster.pipeline import Command, Pipeliner
from tests.cluster.servers import redis_server

BUMP = "return redis.call('INCRBY', KEYS[1], ARGV[1])"


class Counted(Pipeliner):
    """Counts the pipelines actually sent to Redis."""

    sent = 0

    async def _pipe(self, commands: list[Command]) -> list[Any]:
        self.sent += 1
        return await super()._pipe(commands)


async def test_calls_of_one_turn_share_a_pipeline_and_keep_their_own_results_and_errors(tmp_path: Path) -> None:
    from redis.asyncio import Redis
    from redis.exceptions import ResponseError

    with redis_server(tmp_path) as server:
        redis = Redis.from_url(server.url)
        try:
            await redis.set("text", "not a number")
            pipeliner = Counted(redis, [BUMP])
            sha = await redis.script_load(BUMP)

            async def bump(key: str, by: int) -> list[Any]:
                return await pipeliner.send([("EVALSHA", sha, 1, key, by), ("GET", key)])

            async def broken() -> list[Any]:
                return await pipeliner.send([("INCR", "text")])

            calls = [bump(f"n{i}", i) for i in range(1, 31)]  # 31 tasks, started in one turn of the loop
            *results, failure = await asyncio.gather(*calls, broken(), return_exceptions=True)
            assert results == [[i, str(i).encode()] for i in range(1, 31)]
            assert isinstance(failure, ResponseError)  # only its own caller fails
            assert pipeliner.sent == 1  # 31 callers, one round trip

            await redis.script_flush()  # as after a restart: Redis no longer knows the script
            first, second = await asyncio.gather(
                pipeliner.send([("EVALSHA", sha, 1, "n1", 5)]), pipeliner.send([("INCR", "plain")])
            )
            assert first == [6] and second == [1]  # each ran once: only the unknown call was sent again
            assert pipeliner.sent == 3
        finally:
            await redis.aclose()


class Gated(Counted):
    """Holds its first pipeline back until ``gate`` is set: calls are made while it is out."""

    def __init__(self, redis: Any) -> None:
        super().__init__(redis, [])
        self.gate = asyncio.Event()

    async def _pipe(self, commands: list[Command]) -> list[Any]:
        if not self.sent:
            await self.gate.wait()
        return await super()._pipe(commands)


async def test_calls_made_while_a_pipeline_is_out_go_together_in_the_next_in_order(tmp_path: Path) -> None:
    from redis.asyncio import Redis

    with redis_server(tmp_path) as server:
        redis = Redis.from_url(server.url)
        try:
            pipeliner = Gated(redis)
            calls = [pipeliner.send([("RPUSH", "order", 0)])]
            for turn in range(1, 6):  # five turns of the loop while the first pipeline is out
                await asyncio.sleep(0)
                calls += [pipeliner.send([("RPUSH", "order", turn * 10 + n)]) for n in range(4)]
            pipeliner.gate.set()
            lengths = [length for [length] in await asyncio.gather(*calls)]
            assert pipeliner.sent == 2  # the first, then all twenty made meanwhile
            assert lengths == list(range(1, 22))
            assert [int(n) for n in await redis.lrange("order", 0, -1)] == [0] + [
                turn * 10 + n for turn in range(1, 6) for n in range(4)
            ]
        finally:
            await redis.aclose()


async def test_a_lost_connection_fails_every_caller_of_the_batch(tmp_path: Path) -> None:
    from redis.asyncio import Redis
    from redis.exceptions import ConnectionError as RedisConnectionError

    with redis_server(tmp_path) as server:
        redis = Redis.from_url(server.url, retry_on_error=[], retry=None)
        pipeliner = Pipeliner(redis, [])
        assert await pipeliner.send([("SET", "k", "v")]) == [True]
        server.stop()
        try:
            with pytest.raises((RedisConnectionError, OSError)):
                await asyncio.gather(pipeliner.send([("GET", "k")]), pipeliner.send([("GET", "k")]))
        finally:
            await redis.aclose()


async def test_commands_packed_by_hiredis_reach_redis_as_redis_py_would_send_them(tmp_path: Path) -> None:
    """``connect`` has hiredis pack commands (``eclaw[redis]`` installs it): two-word commands, text
    outside ASCII, bytes, numbers and pipelines arrive as redis-py's own packing sends them."""
    from eclaw.cluster.link import connect

    with redis_server(tmp_path) as server:
        redis = await connect(server.url)
        try:
            assert type(redis.connection_pool).__name__ == "BlockingConnectionPool"
            assert redis.connection_pool.connection_class.__name__ == "PackedConnection"  # hiredis is installed
            await redis.config_set("maxmemory-policy", "noeviction")  # "CONFIG SET": one argument, two words
            assert (await redis.config_get("maxmemory-policy"))["maxmemory-policy"] == "noeviction"
            sha = await redis.script_load(BUMP)  # "SCRIPT LOAD"
            await redis.hset("h", mapping={"straße": "größe €", "n": 7, "x": 1.25})
            assert await redis.hgetall("h") == {"straße": "größe €", "n": "7", "x": "1.25"}
            pipe = redis.pipeline(transaction=False)
            pipe.evalsha(sha, 1, "count", 5).set("blob", b"\x00\xff\r\n").strlen("blob")
            assert await pipe.execute() == [5, True, 4]
        finally:
            await redis.aclose()
