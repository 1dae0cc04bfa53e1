"""The middleware contract: one awaited call around the download.

A middleware is any object or function with this signature::

    async def my_middleware(request: Request, call_next: Fetch) -> Response

- request phase: code before ``call_next``; pass a changed request on with
  ``await call_next(request.replace(headers=...))``;
- consume the request: raise ``IgnoreRequest(reason)`` (it ends as
  ``RequestDropped(reason)``) instead of calling ``call_next``;
- response phase: code after ``call_next`` returns; return the response (or a
  different one);
- failure phase: ``except DownloadError`` around ``call_next`` (``HttpError``
  carries the response of a status the spider does not handle).

- retry: raise ``RetryRequest(request, delay=..., reason=...)``; the crawl
  frees the slot and schedules ``request`` again after ``delay``.

Middlewares are configured as a list: the first is the outermost, so it sees
the request first and the response last. A middleware object may also define
``async def open(self, crawl: CrawlContext)`` (called when a crawl starts,
before any request) and ``async def close(self)`` (when it ends).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from eclaw.http.message import Request, Response

if TYPE_CHECKING:
    from eclaw.settings import Settings
    from eclaw.spider import Spider
    from eclaw.stats import Stats

__all__ = ["CrawlContext", "Fetch", "Middleware", "chain"]

Fetch = Callable[[Request], Awaitable[Response]]


class Middleware(Protocol):
    """Anything callable as ``await mw(request, call_next)``."""

    def __call__(self, request: Request, call_next: Fetch, /) -> Awaitable[Response]: ...


class CrawlContext(Protocol):
    """What a middleware's ``open()`` gets: the running crawl, seen from outside."""

    @property
    def spider(self) -> Spider: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def stats(self) -> Stats: ...

    @property
    def run_id(self) -> str:
        """This run's id (in log lines and the files of record)."""

    def dead_letter(self, output: object, items: list[Any], error: BaseException) -> None:
        """``output`` could not write ``items`` it had accepted (a failed batch): dead-letter them for it."""

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        """Politeness: ``seconds`` between two downloads from ``host`` (``None``: every host
        without its own delay); a ``floor`` is never undercut."""

    def stop(self, reason: str) -> None:
        """Stop the crawl gracefully."""


def chain(middlewares: Sequence[Middleware], fetch: Fetch) -> Fetch:
    """Wrap ``fetch`` in ``middlewares`` once; the first is the outermost."""
    handler = fetch
    for middleware in reversed(middlewares):
        if not callable(middleware):
            raise TypeError(f"middleware {middleware!r} is not callable")
        handler = _bind(middleware, handler)
    return handler


def _bind(middleware: Middleware, call_next: Fetch) -> Fetch:
    def call(request: Request) -> Awaitable[Response]:
        return middleware(request, call_next)  # the middleware's own coroutine: no wrapper frame to resume

    return call
