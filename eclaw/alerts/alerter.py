"""The :class:`Alerter`: a bounded queue and one task that sends each alert to every channel,
with retries (exponential backoff) and a rate limit per channel; never blocks its caller."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from eclaw.alerts.channels import Alert, Channel
from eclaw.security.redact import Redactor

__all__ = ["Alerter", "Delivery"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Delivery:
    """How alerts are sent: ``retries`` more tries after a failure, waiting ``backoff`` seconds, then
    twice that...; at most ``rate_limit`` alerts per channel in ``rate_window`` seconds (the others
    are summarised in one alert once the window allows); at most ``queue`` alerts waiting (the newest
    are dropped beyond, with a log line); ``close`` waits at most ``drain`` seconds."""

    retries: int = 3
    backoff: float = 1.0
    rate_limit: int = 5
    rate_window: float = 300.0
    queue: int = 100
    drain: float = 30.0


class _Limit:
    """The sending times of one channel in its window, and the alerts it held back."""

    def __init__(self, limit: int, window: float) -> None:
        self.limit, self.window = limit, window
        self.sent: deque[float] = deque()
        self.held: list[Alert] = []

    def allows(self) -> bool:
        now = time.monotonic()
        while self.sent and now - self.sent[0] >= self.window:
            self.sent.popleft()
        if len(self.sent) < self.limit:
            self.sent.append(now)
            return True
        return False

    def summary(self) -> Alert | None:
        """One alert for the alerts held back (and forget them), or ``None``."""
        if not self.held:
            return None
        held, self.held = self.held, []
        titles = [f"{a.kind}: {a.title}" for a in held[:20]] + ([f"... and {len(held) - 20} more"] * (len(held) > 20))
        return Alert("alerts_held", f"{len(held)} alerts held back by the rate limit", "\n".join(titles))


class Alerter:
    """Sends alerts to ``channels`` in its own task; ``notify`` queues and returns at once.

    ``redactor`` masks secrets in what is logged (the channels' URLs and passwords are always masked).
    """

    def __init__(
        self, channels: Sequence[Channel], delivery: Delivery | None = None, redactor: Redactor | None = None
    ) -> None:
        self.channels = list(channels)
        self.delivery = delivery or Delivery()
        self.redactor = redactor or Redactor()
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self._queue: asyncio.Queue[Alert] | None = None
        self._task: asyncio.Task[None] | None = None
        self._limits = {c.name: _Limit(self.delivery.rate_limit, self.delivery.rate_window) for c in self.channels}

    def __repr__(self) -> str:
        return f"Alerter({[c.name for c in self.channels]}, sent={self.sent}, failed={self.failed})"

    def notify(self, alert: Alert) -> None:
        """Queue ``alert`` (its secrets masked) for every channel; call from the event loop; never waits."""
        if not self.channels:
            logger.warning("alert (no channel): %s", self.redactor.text(alert.title))
            return
        if self._queue is None:
            self._queue = asyncio.Queue()  # bounded here, so that close() can always queue its end
            self._task = asyncio.get_running_loop().create_task(self._run(self._queue), name="eclaw-alerts")
        if self._queue.qsize() >= self.delivery.queue:
            self.dropped += 1
            logger.error("alert dropped, %d already waiting: %s", self.delivery.queue, self.redactor.text(alert.title))
            return
        redact = self.redactor.text
        fields = {redact(k): redact(v) for k, v in alert.fields.items()}
        self._queue.put_nowait(Alert(alert.kind, redact(alert.title), redact(alert.text), fields))

    async def close(self) -> None:
        """Send what is queued (and the summaries of held alerts), waiting at most ``delivery.drain`` s."""
        if self._queue is None or self._task is None:
            return
        self._queue.put_nowait(_END)
        try:
            await asyncio.wait_for(asyncio.shield(self._task), self.delivery.drain)
        except TimeoutError:
            logger.error("alerts: %d not sent within %.0f s", self._queue.qsize(), self.delivery.drain)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._queue = self._task = None

    async def _run(self, queue: asyncio.Queue[Alert]) -> None:
        while True:
            alert = await queue.get()
            if alert is _END:
                break
            await asyncio.gather(*(self._offer(c, alert) for c in self.channels))
        await asyncio.gather(*(self._flush(c) for c in self.channels))

    async def _offer(self, channel: Channel, alert: Alert) -> None:
        limit = self._limits[channel.name]
        if not limit.allows():
            limit.held.append(alert)
            return
        summary = limit.summary()
        if summary is not None:
            await self._deliver(channel, summary)
        await self._deliver(channel, alert)

    async def _flush(self, channel: Channel) -> None:
        summary = self._limits[channel.name].summary()
        if summary is not None:
            await self._deliver(channel, summary)

    async def _deliver(self, channel: Channel, alert: Alert) -> None:
        """Send with retries; a channel that keeps failing is logged (redacted), not raised."""
        delay = self.delivery.backoff
        for attempt in range(self.delivery.retries + 1):
            try:
                await channel.send(alert)
            except Exception as exc:  # any failure of a receiver: retried, then logged
                error = self.redactor.text(f"{type(exc).__name__}: {exc}")
                if attempt == self.delivery.retries:
                    self.failed += 1
                    logger.error("alert to %s failed after %d tries: %s", channel.name, attempt + 1, error)
                    return
                logger.warning("alert to %s failed (%s), retrying in %.1f s", channel.name, error, delay)
                await asyncio.sleep(delay)
                delay *= 2
            else:
                self.sent += 1
                return


_END = Alert("end", "", "")  # the sentinel that close() queues
