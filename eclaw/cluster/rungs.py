"""The escalation ladder's rungs shared by the workers of a Redis crawl.

One hash, ``eclaw:<spider>:rungs``: host -> its rung as JSON (fetcher, since, quiet,
drifted). Each worker pushes the hosts it moved and pulls the others' every
``every`` seconds, keeping for each host the view that changed last; a host moved
up on one worker is fetched with the stronger fetcher by all within one period.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING

from eclaw.cluster.link import connect, crawl_prefix
from eclaw.fetchers.rungs import Rungs

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["SharedRungs"]

logger = logging.getLogger(__name__)


class SharedRungs:
    """Keeps ``rungs`` in step with the other workers' through Redis at ``url``."""

    def __init__(self, url: str, spider: str, rungs: Rungs, every: float = 2.0) -> None:
        self._url = url
        self._key = crawl_prefix(spider) + "rungs"
        self._rungs = rungs
        self._every = every
        self._client: Redis | None = None
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self._client = await connect(self._url)
        await self.sync()
        self._task = asyncio.create_task(self._loop(), name="eclaw-ladder-sync")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._client is not None:
            with contextlib.suppress(Exception):  # a Redis that went away: this worker's moves are lost, not the crawl
                await self.sync()
            await self._client.aclose()
            self._client = None

    async def sync(self) -> None:
        """Push the hosts moved here, pull everyone's."""
        assert self._client is not None
        dirty, self._rungs.dirty = self._rungs.dirty, set()
        saved = self._rungs.dump()
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for host in dirty:
                    if host in saved:
                        pipe.hset(self._key, host, json.dumps(saved[host]))
                    else:
                        pipe.hdel(self._key, host)
                pipe.hgetall(self._key)
                answers = await pipe.execute()
        except BaseException:
            self._rungs.dirty |= dirty  # pushed next time
            raise
        shared = {host: json.loads(text) for host, text in answers[-1].items()}
        self._rungs.load(shared, newer_only=True)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._every)
            try:
                await self.sync()
            except Exception as exc:  # Redis trouble is the frontier's to report; the ladder goes on locally
                logger.debug("ladder: could not share rungs: %s", exc)
