"""Throttle: AutoThrottle-style per-host delay that follows the server's latency."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from eclaw.contracts import Fetch
from eclaw.exceptions import DownloadTimeout, HttpError
from eclaw.http import Request, Response
from eclaw.http.urls import url_host

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext

__all__ = ["Throttle"]

logger = logging.getLogger(__name__)

_BACK_OFF = frozenset({429, 503})


class Throttle:
    """Adapt each host's download delay to how fast it answers.

    After each response the host's delay moves halfway toward
    ``latency / target_concurrency`` (so about ``target_concurrency`` requests
    are in flight to it on average); it never goes below ``min_delay`` (default:
    the ``download_delay`` setting) nor above ``max_delay``, and an error
    response never lowers it. A 429, a 503 or a timeout doubles it.

    Args:
        target_concurrency: average requests in flight per host to aim for.
        start_delay: seconds; the delay of a host before its first response.
        min_delay: seconds; ``None`` means the ``download_delay`` setting.
        max_delay: seconds.
    """

    def __init__(
        self,
        target_concurrency: float = 2.0,
        *,
        start_delay: float = 1.0,
        min_delay: float | None = None,
        max_delay: float = 60.0,
    ) -> None:
        if target_concurrency <= 0 or start_delay < 0 or max_delay < 0 or (min_delay or 0) < 0:
            raise ValueError("Throttle: target_concurrency must be positive and the delays not negative")
        self.target_concurrency = target_concurrency
        self.start_delay = start_delay
        self.min_delay = min_delay
        self.max_delay = max_delay
        self.delays: dict[str, float] = {}
        self._floor = 0.0
        self._crawl: CrawlContext | None = None

    def __repr__(self) -> str:
        return f"Throttle(target_concurrency={self.target_concurrency})"

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        self._floor = crawl.settings.download_delay if self.min_delay is None else self.min_delay
        self.delays.clear()
        crawl.set_delay(None, max(self._floor, self.start_delay))  # hosts not seen yet

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        host = url_host(request.url)
        if host not in self.delays:
            self._set(host, self.start_delay)
        started = time.monotonic()
        try:
            response = await call_next(request)
        except HttpError as exc:
            self._observe(host, time.monotonic() - started, exc.status)
            raise
        except DownloadTimeout:
            self._set(host, max(self.delays[host] * 2, self.start_delay))
            raise
        self._observe(host, time.monotonic() - started, response.status)
        return response

    def _observe(self, host: str, latency: float, status: int) -> None:
        old = self.delays[host]
        if status in _BACK_OFF:
            self._set(host, max(old * 2, self.start_delay))
            return
        new = (old + latency / self.target_concurrency) / 2
        if status >= 300 and new < old:
            return  # an error page can be fast for the wrong reason
        self._set(host, new)

    def _set(self, host: str, delay: float) -> None:
        delay = min(self.max_delay, max(self._floor, delay))
        self.delays[host] = delay
        if self._crawl is not None:
            self._crawl.set_delay(host, delay)
