"""Retry: try failed downloads again, with exponential backoff and full jitter."""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Iterable

from eclaw.contracts import Fetch
from eclaw.exceptions import (
    ConnectError,
    DownloadError,
    DownloadTimeout,
    HttpError,
    RetryRequest,
    TruncatedResponse,
)
from eclaw.http import Request, Response
from eclaw.http.urls import redact_url

__all__ = ["RETRY_STATUSES", "Retry", "retry_after"]

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 522, 524})
_NETWORK = (ConnectError, DownloadTimeout, TruncatedResponse)  # resets, refusals, proxy errors, timeouts


class Retry:
    """Retry network errors, timeouts, truncated bodies and ``statuses``.

    Attempt ``k`` (1-based) waits ``uniform(0, min(cap, base * 2**(k-1)))``
    seconds ("full jitter"), or the server's ``Retry-After`` (seconds or an
    HTTP date) when it sends one, capped at ``max_retry_after``. The wait holds
    no download slot: the request goes back through the frontier afterwards.
    Statuses not in ``statuses`` (404, 410, ...) fail at once, and so do TLS failures (a
    certificate that does not verify, a protocol mismatch: ``TLSError``, not a ``ConnectError``).

    ``Request.meta`` keys: ``max_retry_times`` overrides ``max_retries``;
    ``dont_retry`` turns retrying off for that request.

    Args:
        max_retries: retries after the first attempt.
        statuses: HTTP statuses worth another try.
        base: seconds; the backoff ceiling of the first retry.
        cap: seconds; the backoff ceiling never exceeds it.
        max_retry_after: seconds; a longer ``Retry-After`` is cut to this.
        rng: source of the jitter (tests pass a seeded ``random.Random``).
    """

    def __init__(
        self,
        max_retries: int = 3,
        *,
        statuses: Iterable[int] = RETRY_STATUSES,
        base: float = 0.5,
        cap: float = 30.0,
        max_retry_after: float = 60.0,
        rng: random.Random | None = None,
    ) -> None:
        if max_retries < 0 or base < 0 or cap < 0 or max_retry_after < 0:
            raise ValueError("Retry: max_retries, base, cap and max_retry_after must not be negative")
        self.max_retries = max_retries
        self.statuses = frozenset(statuses)
        self.base = base
        self.cap = cap
        self.max_retry_after = max_retry_after
        self._rng = rng or random.Random()

    def __repr__(self) -> str:
        return f"Retry(max_retries={self.max_retries})"

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        try:
            response = await call_next(request)
        except HttpError as exc:
            if exc.status not in self.statuses:
                raise
            self._again(request, exc.reason, exc, exc.response)
            raise  # not retried: out of attempts
        except _NETWORK as exc:
            self._again(request, exc.reason, exc, None)
            raise
        if response.status in self.statuses and not response.request.meta.get("dont_retry"):
            # a status the spider handles itself (handle_httpstatus_list) is still worth retrying
            self._again(request, f"http {response.status}", None, response)
        return response

    def _again(self, request: Request, reason: str, error: DownloadError | None, response: Response | None) -> None:
        """Raise ``RetryRequest`` unless ``request`` is out of attempts."""
        meta = request.meta
        if meta.get("dont_retry"):
            return
        retries = meta.get("retry_times", 0)
        limit = meta.get("max_retry_times", self.max_retries)
        if retries >= limit:
            if limit:
                logger.warning("gave up on %s after %d attempts: %s", redact_url(request.url), retries + 1, reason)
            return
        delay = self.backoff(retries + 1)
        if response is not None:
            wait = retry_after(response.headers.get("Retry-After"))
            if wait is not None:
                delay = min(wait, self.max_retry_after)
        shown = redact_url(request.url)
        logger.info("retrying %s in %.2fs (attempt %d failed: %s)", shown, delay, retries + 1, reason)
        again = request.replace(dont_filter=True, meta={**meta, "retry_times": retries + 1})
        raise RetryRequest(again, delay=delay, reason=reason, error=error)

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (full jitter)."""
        ceiling = min(self.cap, self.base * 2 ** (attempt - 1))
        return self._rng.uniform(0, ceiling)


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date; ``None`` if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
