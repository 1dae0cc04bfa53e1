"""The frontier past its in-memory window: requests spill to disk and come back in order;
request records are plain JSON with callbacks by name."""

from __future__ import annotations

import random
from typing import Any

import pytest

from eclaw import ConfigError, Engine, Request, Response, Settings, Spider
from eclaw.demo.shop import ShopSpider
from eclaw.demo.site import expected_products
from eclaw.exceptions import NotSerialisable
from eclaw.frontier.default import DefaultFrontier
from eclaw.frontier.serial import dumps, from_line, loads, to_line
from eclaw.testing import collect
from tests.conftest import assert_accounted


class Site(Spider):
    name = "site"

    def parse(self, response: Response) -> Any:
        return None

    def parse_item(self, response: Response, kind: str = "") -> Any:
        return None

    def failed(self, event: Any) -> Any:
        return None


def test_records_round_trip_with_callbacks_by_name() -> None:
    spider = Site()
    request = Request(
        "http://shop.test/a?b=1",
        spider.parse_item,
        method="POST",
        headers={"X-A": "1"},
        body=b"\x00\xffdata",
        meta={"page": 2, "tags": ["x"]},
        priority=-3,
        cb_kwargs={"kind": "book"},
        dont_filter=True,
        errback=spider.failed,
        depth=4,
    )
    back = loads(dumps(request, spider), spider)
    for name in ("url", "method", "headers", "body", "meta", "priority", "cb_kwargs", "dont_filter", "depth"):
        assert getattr(back, name) == getattr(request, name), name
    assert back.callback == spider.parse_item and back.errback == spider.failed
    assert dumps(Request("http://shop.test/"), spider) == '{"url":"http://shop.test/"}'  # small on disk


def test_what_cannot_be_stored_is_named() -> None:
    spider = Site()
    with pytest.raises(NotSerialisable, match="is not a method of the spider"):
        dumps(Request("http://shop.test/", lambda r: None), spider)
    with pytest.raises(NotSerialisable, match="cannot be stored"):
        dumps(Request("http://shop.test/", meta={"when": object()}), spider)

    class Renamed(Spider):
        name = "renamed"

    with pytest.raises(ConfigError, match="needs callback 'parse_item', which spider 'renamed' does not have"):
        loads(dumps(Request("http://shop.test/", spider.parse_item), spider), Renamed())


def test_links_between_processes_are_lines_plain_ones_without_json() -> None:
    spider = Site()
    link = Request("http://shop.test/b%C3%A9?q=1", spider.parse_item, depth=3)
    link.referer = "http://shop.test/list?page=2"
    line = to_line(link, spider)
    assert line == b"http://shop.test/b%C3%A9?q=1\tparse_item\t3\thttp://shop.test/list?page=2\n"
    no_callback = Request("http://shop.test/c")
    rich = Request("http://shop.test/d", spider.parse, method="POST", body=b"x=1", meta={"k": [1]}, priority=2)
    odd = Request("http://shop.test/e", spider.parse)
    odd.referer = "http://shop.test/\tf"  # a field that would break the line: the JSON record instead
    for request in (link, no_callback, rich, odd):
        line = to_line(request, spider)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert line.startswith(b"{") == (request in (rich, odd))
        back = from_line(line[:-1], spider)
        for name in ("url", "method", "body", "meta", "priority", "depth", "dont_filter", "referer", "callback"):
            assert getattr(back, name) == getattr(request, name), (request, name)
        assert back._id == 0 and back.errback is None and back.cb_kwargs == {}
    link._id = 42  # its row in a saved crawl's state: kept, as a fifth field
    assert to_line(link, spider).endswith(b"\tparse_item\t3\thttp://shop.test/list?page=2\t42\n")
    assert from_line(to_line(link, spider)[:-1], spider)._id == 42
    with pytest.raises(NotSerialisable, match="is not a method of the spider"):
        to_line(Request("http://shop.test/", lambda r: None), spider)

    class Renamed(Spider):
        name = "renamed"

    with pytest.raises(ConfigError, match="needs callback 'parse_item', which spider 'renamed' does not have"):
        from_line(to_line(link, spider)[:-1], Renamed())


async def drain(frontier: DefaultFrontier) -> list[Request]:
    out = []
    while frontier.pending():
        request = await frontier.next_request()
        assert request is not None
        out.append(request)
        await frontier.release(request)
    return out


async def test_spilled_requests_come_back_in_order() -> None:
    spider = Site()
    frontier = DefaultFrontier()
    await frontier.open(spider, Settings(frontier_memory=10, concurrency=1), lambda: None)
    try:
        batch = [Request(f"http://shop.test/{n}", spider.parse_item, depth=n % 3) for n in range(100)]
        for n, request in enumerate(batch):
            request._id, request.referer = 1000 + n, f"http://shop.test/list?p={n}"  # as with --state
        urgent = Request("http://shop.test/urgent", priority=5)
        odd = Request("http://shop.test/lambda", lambda r: None)  # cannot be stored: stays in memory
        assert await frontier.enqueue([*batch, urgent, odd]) == [None] * 102
        assert frontier.pending() == 102 and frontier._in_memory == 12 and len(frontier._spill) == 90
        out = await drain(frontier)
    finally:
        await frontier.close()
    urls = [r.url for r in out]
    assert urls[0] == "http://shop.test/urgent"
    assert [u for u in urls if u.rsplit("/", 1)[1].isdigit()] == [r.url for r in batch]  # first in, first out
    back = [r for r in out if r.url.rsplit("/", 1)[1].isdigit()]
    for request, again in zip(batch, back, strict=True):  # what a request carries comes back from the disk
        assert (again._id, again.depth, again.referer) == (request._id, request.depth, request.referer)
        assert again.callback == spider.parse_item
    assert len(urls) == 102 and frontier._spill.spilled == 90


@pytest.mark.parametrize("kept", [4 << 20, 300, 0], ids=["chunks-kept", "some-kept", "none-kept"])
async def test_spilled_requests_of_many_hosts_come_back_in_order(monkeypatch: pytest.MonkeyPatch, kept: int) -> None:
    # Requests of 40 hosts, of three priorities, arrive while others are handed out; most wait on disk,
    # written and deleted in batches of 4. Each one handed out must be the first of all that wait:
    # higher priority first, then first in, first out; whether the rest of a chunk read in part is
    # kept in memory (all, some, none of them: KEPT bytes) or read again from the file.
    monkeypatch.setattr("eclaw.frontier.spill.SpillQueue.BATCH", 4)
    monkeypatch.setattr("eclaw.frontier.spill.SpillQueue.KEPT", kept)
    rng = random.Random(7)
    frontier = DefaultFrontier()
    await frontier.open(Site(), Settings(frontier_memory=8, concurrency=1), lambda: None)
    waiting: dict[str, tuple[int, int]] = {}  # url -> (-priority, arrival)
    handed: list[str] = []
    try:
        for step in range(400):
            if rng.random() < 0.55:
                page = rng.randrange(40)  # most of a page's links go to its own host: chunks of several
                batch = [
                    Request(f"http://h{page if rng.random() < 0.7 else rng.randrange(40)}.test/{step}-{n}",
                            priority=-rng.randrange(3))
                    for n in range(rng.randrange(1, 9))
                ]  # fmt: skip
                assert await frontier.enqueue(batch) == [None] * len(batch)
                waiting.update({r.url: (-r.priority, len(waiting) + len(handed) + i) for i, r in enumerate(batch)})
            elif waiting:
                request = await frontier.next_request()
                assert request is not None
                assert request.url == min(waiting, key=waiting.__getitem__)
                handed.append(request.url)
                del waiting[request.url]
                await frontier.release(request)
        assert frontier._spill.spilled > 100 and frontier.pending() == len(waiting)
        for request in await drain(frontier):
            assert request.url == min(waiting, key=waiting.__getitem__)
            del waiting[request.url]
        spill = frontier._spill
        assert (spill.kept > 0) == (kept > 0) and spill.taken > 0
        assert spill._kept_chars <= kept
    finally:
        await frontier.close()
    assert not waiting


async def test_a_crawl_with_a_tiny_window_is_complete(demo_url: str) -> None:
    items, stats = await collect(ShopSpider, settings=Settings(frontier_memory=20), base_url=demo_url)
    got = sorted(items, key=lambda i: i["sku"])
    assert [{k: v for k, v in item.items() if k != "url"} for item in got] == expected_products()
    assert_accounted(stats)


async def test_stopped_crawl_counts_spilled_requests_as_pending(demo_url: str) -> None:
    engine = Engine(Settings(frontier_memory=50, concurrency=2))

    class Stops(ShopSpider):
        def parse(self, response: Response) -> Any:
            yield from (Request(f"{self.base_url}/product/{n}", self.parse_product) for n in range(1, 400))
            engine.stop("enough")

    _, stats = await collect(Stops, engine=engine, base_url=demo_url)
    assert stats.finish_reason == "enough" and stats.requests_pending > 300
    assert_accounted(stats)


async def test_a_host_stuck_behind_its_delay_does_not_starve_spilled_hosts() -> None:
    spider = Site()
    frontier = DefaultFrontier()
    await frontier.open(spider, Settings(frontier_memory=10, concurrency=4), lambda: None)
    frontier.set_delay("slow.test", 3600)
    try:
        await frontier.enqueue([Request(f"http://slow.test/{n}") for n in range(30)])
        await frontier.enqueue([Request(f"http://fast.test/{n}") for n in range(30)])
        assert len(frontier._spill) == 50  # the window is full of slow.test's requests
        got = []
        for _ in range(31):
            request = await frontier.next_request()
            assert request is not None
            got.append(request.url)
            await frontier.release(request)
        assert got[0] == "http://slow.test/0"  # then slow.test waits an hour...
        assert got[1:] == [f"http://fast.test/{n}" for n in range(30)]  # ...and fast.test comes back from disk
        assert await frontier.next_request() is None and frontier.pending() == 29
    finally:
        await frontier.close()
