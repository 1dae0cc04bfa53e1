"""One callback on one response, and what it yielded: ``eclaw parse``, the shell, a spider's tests.

The callback runs through the crawl's own parser (:class:`~eclaw.core.callbacks.CallbackParser`),
so it is called exactly as in a crawl (``cb_kwargs``, async or not, returning or yielding).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterable
from typing import Any

from eclaw.contracts import Fetch
from eclaw.core.callbacks import CallbackParser
from eclaw.core.expect import ItemExpectations
from eclaw.exceptions import ConfigError
from eclaw.frontier.base import fingerprint
from eclaw.http import Request, Response
from eclaw.items import is_item, item_to_dict, validate
from eclaw.spider import Spider

__all__ = ["Outputs", "Parsed", "crawl_from", "problems_of", "resolve_callback", "run_callback"]

_PARSER = CallbackParser()


@dataclasses.dataclass
class Outputs:
    """What a callback yielded: ``items`` and ``requests``, in order."""

    items: list[Any] = dataclasses.field(default_factory=list)
    requests: list[Request] = dataclasses.field(default_factory=list)

    def add(self, value: object, depth: int) -> None:
        if isinstance(value, Request):
            value.depth = depth
            self.requests.append(value)
        elif is_item(value):
            self.items.append(value)
        elif value is not None:  # None is skipped, as in a crawl
            raise TypeError(f"callback yielded {type(value).__name__}: expected an item (dict, dataclass) or Request")


@dataclasses.dataclass
class Parsed:
    """One page of ``eclaw parse``: its request, what its callback yielded, and what is wrong with it."""

    request: Request
    depth: int
    outputs: Outputs
    problems: list[str]  # per item, "" when it is valid; then page-level problems
    error: BaseException | None = None


async def run_callback(spider: Spider, response: Response, callback: str | None = None) -> Outputs:
    """Run the callback of ``response.request`` (or the spider's method ``callback``) and collect its outputs.

    Raises whatever the callback raises, and :class:`~eclaw.exceptions.ConfigError` for an
    unknown ``callback`` name.
    """
    if callback is not None:
        response.request.callback = resolve_callback(spider, callback)
    produced = _PARSER.parse(response, spider)
    outputs, depth = Outputs(), response.request.depth + 1
    if isinstance(produced, AsyncIterator):
        async for value in produced:
            outputs.add(value, depth)
    else:
        for value in produced:
            outputs.add(value, depth)
    return outputs


def resolve_callback(spider: Spider, name: str) -> Any:
    """The spider's method ``name``; a one-line error naming the methods it has otherwise."""
    method = getattr(spider, name, None) if not name.startswith("_") else None
    if not callable(method):
        methods = sorted(n for n in dir(type(spider)) if n.startswith("parse") and callable(getattr(spider, n)))
        raise ConfigError(f"spider {spider.name!r} has no callback {name!r} (it has: {', '.join(methods) or 'none'})")
    return method


def problems_of(spider: Spider, request: Request, outputs: Outputs) -> list[str]:
    """Per item what is wrong with it ("" if nothing), then what is wrong with the page."""
    required = tuple(spider.required_fields)
    found = []
    for item in outputs.items:
        problem = validate(item)
        if problem is None and required and type(item) is dict:
            missing = [name for name in required if item_to_dict(item).get(name) in (None, "")]
            problem = f"required field {missing[0]!r} is empty" if missing else None
        found.append(problem or "")
    if not outputs.items and ItemExpectations(spider).wanted(request):
        found.append("no items, where the spider expects some (expect_items)")
    return found


async def crawl_from(
    spider: Spider, fetch: Fetch, request: Request, *, depth: int = 1, concurrency: int = 8
) -> AsyncIterator[Parsed]:
    """``request``'s page and, ``depth`` levels down, the pages of the requests the callbacks
    yield (each URL once); ``fetch`` downloads a request (a :meth:`Session.fetch`)."""
    level, seen = [request], {fingerprint(request)}
    limit = asyncio.Semaphore(concurrency)

    async def one(request: Request, at: int) -> Parsed:
        async with limit:
            try:
                response = await fetch(request)
                outputs = await run_callback(spider, response)
            except ConfigError:  # a spider without parse(): one line, exit 2
                raise
            except Exception as exc:
                return Parsed(request, at, Outputs(), [], exc)
        return Parsed(request, at, outputs, problems_of(spider, request, outputs))

    for at in range(1, depth + 1):
        pages = await asyncio.gather(*(one(r, at) for r in level))
        level = []
        for page in pages:
            yield page
            if at < depth:
                level.extend(_new(page.outputs.requests, seen))
        if not level:
            return


def _new(requests: Iterable[Request], seen: set[bytes]) -> Iterable[Request]:
    for request in requests:
        key = fingerprint(request)
        if request.dont_filter or key not in seen:
            seen.add(key)
            yield request
