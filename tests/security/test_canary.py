"""The canary test: one crawl with planted secrets (a bearer token, a URL password, a proxy password,
a secret argument, a cookie) through every writer at once, then every byte of every file it wrote
(gzip and SQLite decoded too), and every Redis key and value, searched for them.

What is searched is the crawl's working folder; the spider's source (it holds the secrets) and
tinyproxy's configuration live outside it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from tests.cluster.servers import redis_server
from tests.security.test_redaction import crawl, eclaw, leaks, written

WRITERS = (
    "--trace", "trace.jsonl", "--log-level", "DEBUG", "--log-format", "json", "--log-file", "crawl.log",
    "-o", "items.jsonl",
)  # fmt: skip


async def test_no_planted_secret_in_any_file_written(tmp_path: Path) -> None:
    """A recorded run, then a run with ``--state`` (both: failures, drops, snapshots, store, logs, trace),
    and the report of each trace."""
    work = tmp_path / "work"
    work.mkdir()
    _, recorded_err = await crawl(tmp_path, *WRITERS, "--record", "rec", cwd=work)
    _, state_err = await crawl(tmp_path, *WRITERS, "--state", "state", "-s", "store=store.sqlite", cwd=work)
    code, _, err = await eclaw(work, "report", "trace.jsonl", "-o", "report.html")
    assert code == 0, err
    for kind in ("snapshot.json", "failures.jsonl", "drops.jsonl", "state.sqlite", "recording.json", "*.sqlite"):
        written(work, kind)  # every writer wrote something to search
    assert leaks(work, [("the console", recorded_err + state_err)]) == []


async def test_no_planted_secret_in_redis(tmp_path: Path) -> None:
    """The same crawl sharing its frontier in a real redis-server: every key and value searched."""
    work, data = tmp_path / "work", tmp_path / "redis"
    work.mkdir()
    data.mkdir()
    with redis_server(data) as server:
        _, err = await crawl(tmp_path, *WRITERS, "--redis", server.url, cwd=work)
        redis = Redis.from_url(server.url)
        try:
            stored = [(f"Redis {key!r}", text) async for key, text in _contents(redis)]
        finally:
            await redis.aclose()
    assert any("stats" in where for where, _ in stored)  # the crawl did write to Redis
    assert leaks(work, [*stored, ("the console", err)]) == []


async def _contents(redis: Redis) -> AsyncIterator[tuple[str, str]]:
    """Every key of the database and its value as text, whatever its type."""
    db: Any = redis  # its replies are bytes (no decode_responses)
    async for key in db.scan_iter(count=1000):
        kind = (await db.type(key)).decode()
        values: list[Any]
        if kind == "string":
            values = [await db.get(key)]
        elif kind == "hash":
            values = [v for pair in (await db.hgetall(key)).items() for v in pair]
        elif kind in ("list", "set"):
            values = list(await db.lrange(key, 0, -1) if kind == "list" else await db.smembers(key))
        elif kind == "zset":
            values = [member for member, _ in await db.zrange(key, 0, -1, withscores=True)]
        else:  # a stream: its entries' fields
            values = [str(entry).encode() for entry in await db.xrange(key)]
        name = key.decode("latin-1")
        yield name, "\n".join([name, *(bytes(v or b"").decode("latin-1") for v in values)])
