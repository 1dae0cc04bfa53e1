"""Events and subscriptions."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from eclaw import Engine, Request, Response, Spider
from eclaw.events import (
    EngineIdle,
    Event,
    ItemEvent,
    ItemParsed,
    ItemStored,
    RequestEvent,
    RequestGenerated,
    ResponseParsed,
)
from eclaw.testing import collect


def test_events_are_frozen_slotted_keyword_only() -> None:
    event = RequestGenerated(request=Request("http://x.test/"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.request = Request("http://y.test/")  # type: ignore[misc]
    assert not hasattr(event, "__dict__")
    with pytest.raises(TypeError):
        RequestGenerated(Request("http://x.test/"))  # type: ignore[misc]


class Tiny(Spider):
    name = "tiny"

    async def start_requests(self) -> Any:
        yield Request("http://tiny.test/")

    def parse(self, response: Response) -> Any:
        yield {"n": 1}


class Fake:
    async def open(self, spider: Spider, settings: Any) -> None:
        pass

    async def fetch(self, request: Request) -> Response:
        return Response(request.url, body=b"<html></html>", request=request)

    async def close(self) -> None:
        pass


async def test_base_class_subscription_sees_subclasses_in_order() -> None:
    engine = Engine(fetcher=Fake)
    seen: list[str] = []

    async def everything(event: Event) -> None:
        seen.append(type(event).__name__)

    async def requests(event: RequestEvent) -> None:
        seen.append("request:" + type(event).__name__)

    async def items(event: ItemEvent) -> None:
        seen.append("item:" + type(event).__name__)

    engine.subscribe(Event, everything)
    engine.subscribe(RequestEvent, requests)
    engine.subscribe(ItemEvent, items)
    await collect(Tiny, engine=engine)
    assert seen[0] == "SpiderOpened"
    assert seen[-1] == "SpiderClosed"
    assert "EngineIdle" in seen
    assert "request:RequestGenerated" in seen and "item:ItemStored" in seen
    # both handlers run for an ItemParsed, in subscription order
    i = seen.index("ItemParsed")
    assert seen[i + 1] == "item:ItemParsed"


async def test_priority_orders_handlers() -> None:
    engine = Engine(fetcher=Fake)
    order: list[str] = []

    @engine.on(ItemParsed, priority=10)
    async def late(event: ItemParsed) -> None:
        order.append("late")

    @engine.on(ItemParsed, priority=-10)
    async def early(event: ItemParsed) -> None:
        order.append("early")

    @engine.on(ItemParsed)
    async def middle(event: ItemParsed) -> None:
        order.append("middle")

    await collect(Tiny, engine=engine)
    assert order == ["early", "middle", "late"]


async def test_subscriptions_freeze_when_engine_starts() -> None:
    engine = Engine(fetcher=Fake)

    async def handler(event: Event) -> None:
        pass

    unsubscribe = engine.subscribe(Event, handler)
    unsubscribe()  # allowed before start
    async with engine:
        with pytest.raises(RuntimeError, match="after the engine started"):
            engine.subscribe(Event, handler)


async def test_plain_handlers_are_called_too_and_non_events_refused() -> None:
    engine = Engine(fetcher=Fake)
    seen: list[str] = []
    engine.subscribe(ItemStored, lambda event: seen.append(type(event).__name__))  # a plain function: called
    with pytest.raises(TypeError, match="not callable"):
        engine.subscribe(Event, "handler")  # type: ignore[arg-type]

    async def handler(event: Any) -> None:
        pass

    with pytest.raises(TypeError, match="Event class"):
        engine.subscribe(int, handler)  # type: ignore[type-var]
    items, _ = await collect(Tiny, engine=engine)
    assert seen == ["ItemStored"] * len(items) and items


async def test_unsubscribed_handler_is_not_called() -> None:
    engine = Engine(fetcher=Fake)
    calls: list[Event] = []

    async def handler(event: Event) -> None:
        calls.append(event)

    engine.subscribe(ItemStored, handler)()
    await collect(Tiny, engine=engine)
    assert calls == []


async def test_idle_handler_can_add_requests() -> None:
    class Feeder(Spider):
        name = "feeder"
        start_urls = ["http://feed.test/0"]

        def parse(self, response: Response) -> Any:
            yield {"url": response.url}

    engine = Engine(fetcher=Fake)
    extra = iter(["http://feed.test/1", "http://feed.test/2"])
    crawl_ref: dict[str, Any] = {}

    @engine.on(EngineIdle)
    async def feed_more(event: EngineIdle) -> None:
        url = next(extra, None)
        if url is not None:
            crawl_ref["crawl"].emit(RequestGenerated(request=Request(url)))

    crawl = engine.prepare(Feeder)
    crawl_ref["crawl"] = crawl
    async with engine:
        stats = await engine.run_crawl(crawl)
    assert stats.items_stored == 3
    assert stats.requests_parsed == 3


async def test_response_parsed_carries_counts() -> None:
    engine = Engine(fetcher=Fake)
    parsed: list[ResponseParsed] = []

    @engine.on(ResponseParsed)
    async def keep(event: ResponseParsed) -> None:
        parsed.append(event)

    await collect(Tiny, engine=engine)
    assert [(p.items, p.requests) for p in parsed] == [(1, 0)]
