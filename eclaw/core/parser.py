"""The parser: runs spider callbacks and normalises what they produce."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from eclaw.http import Request, Response
from eclaw.items import is_item

if TYPE_CHECKING:
    from eclaw.events import RequestFailed
    from eclaw.spider import Spider

__all__ = ["CallbackParser", "Parser"]


@runtime_checkable
class Parser(Protocol):
    """Turns a response (or a final failure) into items and requests."""

    def parse(self, response: Response, spider: Spider) -> AsyncIterator[object] | Iterable[object]: ...

    def recover(self, failure: RequestFailed, spider: Spider) -> AsyncIterator[object] | Iterable[object]: ...


class CallbackParser:
    """Calls ``request.callback`` (default ``spider.parse``) with the response,
    and ``request.errback`` with a final ``RequestFailed``.

    A callback may be an async generator, a generator, a coroutine, or a plain
    function; it may return or yield items (dicts, dataclass instances),
    ``Request`` objects, an iterable of them, or ``None``.
    """

    def parse(self, response: Response, spider: Spider) -> AsyncIterator[object] | Iterable[object]:
        request = response.request
        callback = request.callback or spider.parse
        kwargs = request._cb_kwargs
        return _outputs(callback(response, **kwargs) if kwargs else callback(response))

    def recover(self, failure: RequestFailed, spider: Spider) -> AsyncIterator[object] | Iterable[object]:
        errback = failure.request.errback
        if errback is None:
            return ()
        return _outputs(errback(failure))


def _outputs(result: Any) -> AsyncIterator[object] | Iterable[object]:
    """What a callback returned, as something to iterate (async or not)."""
    if inspect.isgenerator(result) or inspect.isasyncgen(result):
        return result  # the common case, iterated without an extra wrapper
    if inspect.isawaitable(result):
        return _awaited(result)
    return _plain(result)


async def _awaited(result: Any) -> AsyncIterator[object]:
    for value in _plain(await result):
        yield value


def _plain(result: Any) -> Iterable[object]:
    if result is None:
        return ()
    if isinstance(result, Request) or is_item(result):
        return (result,)
    if isinstance(result, str | bytes) or not isinstance(result, Iterable):
        raise TypeError(f"callback returned {type(result).__name__}: expected items, Requests or None")
    return result
