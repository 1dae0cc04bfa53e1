"""Wake-ups between the workers of a crawl: a Redis pub/sub channel the frontier's scripts publish on.

The scripts in :mod:`eclaw.cluster.lua` publish ``work`` when requests land in an
empty queue (a worker that found nothing to take need not wait for its next
heartbeat to see them) and ``end`` when the last lease of the crawl is dropped
(every worker sees the end at once). A message only prompts a worker to ask
Redis again; heartbeats still refresh everything, so a message missed while
Redis was away costs time, never correctness.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.client import PubSub

__all__ = ["Wakeups"]

logger = logging.getLogger(__name__)

_CONFIRM = 10.0  # seconds for Redis to confirm a subscription (else: as if Redis were away)


class Wakeups:
    """Listens on ``channel`` in a task of its own and calls ``heard(message)`` for each message.

    Args:
        redis: the worker's client (the subscription takes a connection of its own).
        channel: the crawl's channel (``eclaw:<spider>:events``).
        heard: called with ``"work"`` or ``"end"``; it must not block.
    """

    def __init__(self, redis: Redis, channel: str, heard: Callable[[str], None]) -> None:
        self._redis = redis
        self._channel = channel
        self._heard = heard
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"Wakeups({self._channel!r})"

    async def start(self) -> None:
        """Subscribe now (so no message published after this returns is missed), then listen."""
        pubsub = await self._subscribe()
        self._task = asyncio.create_task(self._listen(pubsub))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _subscribe(self) -> PubSub:
        """A subscription Redis has confirmed: a message published from then on reaches it (SUBSCRIBE
        sent is not enough: another client's PUBLISH may be served before it)."""
        pubsub = self._redis.pubsub()  # its confirmation is read below; only "message" replies are heard
        try:
            await pubsub.subscribe(self._channel)
            async with asyncio.timeout(_CONFIRM):  # it comes first on this connection: a message only after it
                while (reply := await pubsub.get_message(ignore_subscribe_messages=False, timeout=None)) is None or (
                    reply["type"] != "subscribe"
                ):
                    pass
        except BaseException:
            await _close(pubsub)
            raise
        return pubsub

    async def _listen(self, pubsub: PubSub | None) -> None:
        from redis.exceptions import RedisError

        wait = 0.1
        while True:
            try:
                if pubsub is None:  # Redis was away: subscribe again; what was said meanwhile is lost
                    pubsub = await self._subscribe()
                    self._heard("work")  # so ask Redis now rather than at the next heartbeat
                    wait = 0.1
                message = await pubsub.get_message(timeout=None)
                if message is not None and message["type"] == "message":
                    self._heard(str(message["data"]))
            except (RedisError, OSError, TimeoutError) as exc:
                logger.debug("wake-ups on %s interrupted (%s): again in %.1fs", self._channel, exc, wait)
                if pubsub is not None:
                    await _close(pubsub)
                    pubsub = None
                await asyncio.sleep(wait)
                wait = min(wait * 2, 2.0)
            except asyncio.CancelledError:
                if pubsub is not None:
                    await _close(pubsub)
                raise


async def _close(pubsub: PubSub) -> None:
    with contextlib.suppress(Exception):  # its connection may be dead already: nothing to keep
        await pubsub.aclose()
