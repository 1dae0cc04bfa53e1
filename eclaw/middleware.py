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

Middlewares are configured as a list: the first is the outermost, so it sees
the request first and the response last.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from eclaw.http import Request, Response

__all__ = ["Fetch", "Middleware", "chain"]

Fetch = Callable[[Request], Awaitable[Response]]


class Middleware(Protocol):
    """Anything callable as ``await mw(request, call_next)``."""

    def __call__(self, request: Request, call_next: Fetch, /) -> Awaitable[Response]: ...


def chain(middlewares: Sequence[Middleware], fetch: Fetch) -> Fetch:
    """Wrap ``fetch`` in ``middlewares`` once; the first is the outermost."""
    handler = fetch
    for middleware in reversed(middlewares):
        if not callable(middleware):
            raise TypeError(f"middleware {middleware!r} is not callable")
        handler = _bind(middleware, handler)
    return handler


def _bind(middleware: Middleware, call_next: Fetch) -> Fetch:
    async def call(request: Request) -> Response:
        return await middleware(request, call_next)

    return call
