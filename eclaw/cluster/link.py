"""A worker's line to Redis: one client, the frontier's scripts, every call pipelined with the others
of its turn of the loop and retried while Redis cannot be reached."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from eclaw.cluster import lua as redis_lua
from eclaw.cluster.pipeline import Pipeliner, pack_in_c
from eclaw.exceptions import ConfigError, RedisLost
from eclaw.http.urls import redact_url

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RedisLink", "ScriptCall", "connect", "crawl_prefix"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
ScriptCall = tuple[str, Sequence[str], Sequence[Any]]  # a script's name, its keys (after the prefix), its arguments
_CONNECTIONS = 64  # per client; more gain nothing against one single-threaded redis-server
_SCRIPTS = ("ENQUEUE", "LEASE", "COMPLETE", "REQUEUE", "REAP", "COUNT", "ACQUIRE", "MARK")


async def connect(url: str) -> Redis:
    """A client for ``url``, checked with a PING: a one-line :class:`ConfigError` if Redis cannot be reached."""
    try:
        from redis.asyncio import BlockingConnectionPool, Redis
    except ImportError:
        raise ConfigError("frontier_url needs the redis package: pip install 'eclaw[redis]'") from None
    from redis.exceptions import RedisError

    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(f"bad Redis URL {url!r} (use redis://HOST:PORT/DB)")
    # a bounded pool whose callers wait for a free connection: redis-py's default pool (100 connections)
    # raises "Too many connections" once more than 100 downloads release their slots at the same moment.
    # The wait is bounded too: with Redis gone, a caller must fail (and the crawl pause), not wait for ever.
    options = {"decode_responses": True, "socket_connect_timeout": 3, "socket_timeout": 10}
    pool = BlockingConnectionPool.from_url(url, max_connections=_CONNECTIONS, timeout=10, **options)
    pack_in_c(pool)
    client = Redis.from_pool(pool)  # owns the pool: aclose() closes its connections
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        raise ConfigError(f"cannot reach Redis at {redact_url(url)}: {exc}") from None
    return client


def crawl_prefix(spider_name: str) -> str:
    """The start of every Redis key of the crawl of the spider called ``spider_name``."""
    return f"eclaw:{spider_name}:"


class RedisLink:
    """The connection of worker ``worker`` to the crawl whose keys start with ``prefix``."""

    def __init__(self, url: str, worker: str) -> None:
        self.url = url
        self.worker = worker
        self.redis: Redis | None = None
        self.prefix = ""
        self.retry_for = 30.0  # seconds a call is retried while Redis is away (the crawl's lease_timeout)
        self._lost = False
        self._unreachable: tuple[type[Exception], ...] = (OSError,)
        self._shas: dict[str, str] = {}
        self._pipeliner: Pipeliner | None = None
        self._retries: set[asyncio.Task[Any]] = set()  # commands sent again after their pipeline was lost

    async def open(self, prefix: str, retry_for: float) -> Redis:
        self.prefix, self.retry_for = prefix, retry_for
        self.redis = redis = await connect(self.url)
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeout

        self._unreachable = (RedisConnectionError, RedisTimeout, OSError)  # what ``call`` retries
        scripts = [getattr(redis_lua, name) for name in _SCRIPTS]
        self._shas = {name: redis.register_script(code).sha for name, code in zip(_SCRIPTS, scripts, strict=True)}
        self._pipeliner = Pipeliner(redis, scripts)
        return redis

    async def close(self) -> None:
        for task in self._retries:
            task.cancel()
        await asyncio.gather(*self._retries, return_exceptions=True)
        if self.redis is not None:
            await self.redis.aclose()
            self.redis = None

    def unreachable(self, error: BaseException) -> bool:
        """``error`` says Redis could not be reached (what :meth:`call` retries)."""
        return isinstance(error, self._unreachable)

    async def call(self, make: Callable[[], Awaitable[T]]) -> T:
        """``await make()``, retried with backoff for up to ``retry_for`` seconds while Redis cannot be reached;
        then :class:`RedisLost` (and later calls fail at once, until one gets through)."""
        loop = asyncio.get_running_loop()
        give_up, wait = loop.time() + (0 if self._lost else self.retry_for), 0.1
        while True:
            try:
                result = await make()
                self._lost = False
                return result
            except self._unreachable as exc:
                if loop.time() + wait > give_up:
                    self._lost = True  # later calls fail at once: the crawl is pausing
                    raise RedisLost(
                        f"Redis at {redact_url(self.url)} lost ({exc}): crawl paused; its frontier is kept in Redis,"
                        " start the workers again once Redis is back"
                    ) from None
                logger.warning("Redis unreachable (%s): retrying in %.1fs", exc, wait)
                await asyncio.sleep(wait)
                wait = min(wait * 2, 2.0)

    def queue(self, *args: Any) -> asyncio.Future[list[Any]]:
        """One command (``"HSETNX", key, field, value``), sent with the others of this turn of the loop; its
        result (or error, not retried) comes in the future."""
        assert self._pipeliner is not None
        return self._pipeliner.send([args])

    async def command(self, *args: Any) -> Any:
        """:meth:`queue`, awaited."""
        return (await self.queue(*args))[0]

    def send(self, *args: Any) -> None:
        """:meth:`queue`, and nothing waits for it: if its pipeline is lost, it is sent again (with
        :meth:`call`'s retries); if Redis stays away, a warning says so."""
        self.queue(*args).add_done_callback(lambda sent: self._again(sent, args))

    def _again(self, sent: asyncio.Future[list[Any]], args: tuple[Any, ...]) -> None:
        error = None if sent.cancelled() else sent.exception()
        if error is None or not self.unreachable(error):
            return
        task = asyncio.ensure_future(self.call(lambda: self.command(*args)))
        self._retries.add(task)
        task.add_done_callback(lambda done: self._retried(done, str(args[0])))

    def _retried(self, task: asyncio.Task[Any], name: str) -> None:
        self._retries.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("a %s could not be sent to Redis: %s", name, task.exception())

    async def run(self, script: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """One script (by name, see :mod:`eclaw.cluster.lua`), retried: its result."""
        return (await self.call(lambda: self.scripts([(script, keys, args)])))[0]

    def scripts(self, calls: Sequence[ScriptCall]) -> Awaitable[list[Any]]:
        """The scripts, sent with the other calls of this turn of the loop (by hash, loaded if Redis forgot
        them): their results, in order."""
        assert self._pipeliner is not None
        prefix = self.prefix
        return self._pipeliner.send(
            [("EVALSHA", self._shas[name], len(keys), *[prefix + k for k in keys], *args) for name, keys, args in calls]
        )
