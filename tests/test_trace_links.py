"""The trace of a crawl whose pages repeat their links (a wiki: every article has the whole
sidebar, in Latin-1): one line per URL's fate, a page's duplicate links summed in its
``ResponseParsed`` (or ``RequestFailed``) line, and the counts read back from the trace equal
the crawl's stats."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from lxml import html as lxml_html

from eclaw import Response, Settings, Spider
from eclaw.cli import main
from eclaw.core.bus import Batched, EventBus
from eclaw.events import RequestDropped, RequestScheduled
from eclaw.http import Request
from eclaw.observe.report import lifecycle, read_trace, totals
from eclaw.stats import Stats
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted

ARTICLES = [f"caf\u00e9-{n}" for n in range(24)]  # "café-0"...: percent-escaped in URLs


def wiki_app() -> web.Application:
    """Articles with a sidebar linking every article (some with a fragment), an offsite link, a
    renamed article (a redirect to the first), a missing one (404) and one the spider fails on."""
    sidebar = "".join(
        f'<li><a href="/wiki/{slug}{"#top" if n % 3 else ""}">{slug}</a></li>' for n, slug in enumerate(ARTICLES)
    )
    sidebar += '<li><a href="/wiki/old-name">old</a></li><li><a href="/wiki/missing">?</a></li>'
    sidebar += '<li><a href="/wiki/broken">broken</a></li><li><a href="http://elsewhere.test/">away</a></li>'

    async def article(request: web.Request) -> web.Response:
        slug = request.match_info["slug"]
        if slug == "old-name":
            raise web.HTTPFound(f"/wiki/{ARTICLES[0]}")
        if slug != "broken" and slug not in ARTICLES:
            raise web.HTTPNotFound()
        body = f"<html><head><title>Article {slug}</title></head><body><ul>{sidebar}</ul></body></html>"
        return web.Response(body=body.encode("latin-1"), content_type="text/html", charset="iso-8859-1")

    app = web.Application()
    app.router.add_get("/wiki/{slug}", article)
    return app


class Wiki(Spider):
    """A plain generator: a page's links go to the frontier as one batch when its callback ends."""

    name = "wiki"
    allowed_domains = ["127.0.0.1"]

    async def start_requests(self) -> AsyncIterator[Request]:  # not dont_filter, as start_urls are (Scrapy)
        for url in self.start_urls:
            yield Request(url)

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"title": response.css("title::text").get()}
        yield from response.follow_all(css="a")
        if response.url.endswith("/broken"):
            raise ValueError("a page the spider cannot handle")


class AsyncWiki(Wiki):
    """An async generator: each link goes to the frontier as it is yielded."""

    name = "async-wiki"

    async def parse(self, response: Response) -> AsyncIterator[Any]:  # type: ignore[override]
        for value in super().parse(response):
            yield value


async def crawl(spider: type[Spider], trace: Path) -> tuple[str, Stats, list[dict[str, Any]]]:
    async with serve(wiki_app()) as base:
        start = [f"{base}/wiki/{ARTICLES[0]}"] * 2  # the second: a duplicate that comes from no page
        items, stats = await collect(spider, settings=Settings(trace=str(trace), failures=""), start_urls=start)
    assert_accounted(stats)
    assert len(items) == len(ARTICLES) + 1 and {"Article caf\u00e9-5", "Article broken"} <= {i["title"] for i in items}
    return base, stats, read_trace(trace)


@pytest.mark.parametrize("spider", [Wiki, AsyncWiki])
async def test_the_trace_accounts_for_every_link_with_one_line_per_url(tmp_path: Path, spider: type[Spider]) -> None:
    base, stats, records = await crawl(spider, tmp_path / "trace.jsonl")
    counts = totals(records)
    assert counts == {key: getattr(stats, key) for key in counts}, (counts, stats.as_dict())
    assert stats.dropped_by_reason["duplicate"] > 20 * len(ARTICLES)  # the sidebar, again and again
    # the broken page's links count only if they went on before its callback failed (see below)
    assert stats.dropped_by_reason["offsite"] == len(ARTICLES) + (spider is AsyncWiki)
    assert stats.requests_failed == 2  # the missing article, the broken one

    # lines per URL, not per link: the duplicates dropped one by one are the start URL given twice
    # and the renamed article, whose redirect ends at a page crawled already
    one_by_one = [r["url"] for r in records if r["event"] == "RequestDropped" and r["reason"] == "duplicate"]
    assert sorted(one_by_one) == sorted([f"{base}/wiki/caf%C3%A9-0", f"{base}/wiki/old-name"])
    assert [r["url"] for r in records if r["event"] == "RequestGenerated"] == [f"{base}/wiki/caf%C3%A9-0"] * 2
    assert len(records) < 8 * (len(ARTICLES) + 4)  # about 5 a page, and the offsite link

    parsed = {r["url"].rpartition("/")[2]: r for r in records if r["event"] == "ResponseParsed"}
    assert all(r["duplicates"] > 0 and r["requests"] == len(ARTICLES) + 4 for r in parsed.values())
    (failed,) = [r for r in records if r["event"] == "RequestFailed" and r["url"].endswith("/broken")]
    # an async generator's links went on before the callback failed; a plain one's never did
    assert failed.get("duplicates", 0) == (len(ARTICLES) + 3 if spider is AsyncWiki else 0)


async def test_eclaw_trace_and_report_on_a_trace_of_repeated_links(tmp_path: Path, capsys: Any) -> None:
    trace = tmp_path / "trace.jsonl"
    base, stats, records = await crawl(AsyncWiki, trace)

    # an article every page links to: found by any of its links, its first sighting's own lines
    story = lifecycle(records, url=f"{base}/wiki/caf%C3%A9-7#top")
    steps = [line.split()[1] for line in story.splitlines()[1:]]
    assert steps[:2] == ["RequestScheduled", "ResponseDownloaded"], story  # no line for each link to it
    assert sorted(steps[2:]) == ["ItemParsed", "ItemStored", "ResponseParsed"], story
    assert "dropped as duplicates)" in story
    assert main(["trace", str(trace), "--url", f"{base}/wiki/broken"]) == 0
    shown = capsys.readouterr().out
    assert "links dropped as duplicates" in shown and "callback error: ValueError" in shown
    assert main(["trace", str(trace), "--url", f"{base}/wiki/caf%C3%A9-0"]) == 0  # a start URL given twice
    shown = capsys.readouterr().out
    assert shown.splitlines()[1].split()[1] == "RequestGenerated" and "(and 1 more links to it" in shown

    assert main(["report", str(trace), "-o", str(tmp_path / "report.html")]) == 0
    page = lxml_html.fromstring((tmp_path / "report.html").read_text())
    sentence = (
        f"{stats.requests_generated} requests: {stats.requests_parsed} parsed, {stats.requests_failed} failed, "
        f"{stats.requests_dropped} dropped ({stats.dropped_by_reason['duplicate']} duplicate, "
    )
    assert sentence in page.text_content()


async def test_a_watcher_taking_batches_gets_each_batch_once_and_its_failure_is_counted() -> None:
    stats = Stats()
    bus = EventBus(lambda kind: (), stats, crawl=None)
    owned: list[list[tuple[Request, str]]] = []
    seen: list[tuple[int, Any]] = []

    async def owner(drops: list[tuple[Request, str]], context: Any) -> None:
        owned.append(drops)

    make = lambda drop, context: RequestDropped(request=drop[0], reason=drop[1])  # noqa: E731
    bus.own_batched(RequestDropped, Batched(owner, make, lambda event: ((event.request, event.reason), None)))
    bus.subscribe_batches(RequestDropped, lambda drops, parent: seen.append((len(drops), parent)))
    bus.subscribe_batches(RequestDropped, lambda drops, parent: 1 / 0)
    drops = [(Request(f"http://x.test/{n}"), "duplicate") for n in range(3)]
    await bus.publish_batch(RequestDropped, drops, "the page")
    assert seen == [(3, "the page")] and owned == [drops] and stats.handler_errors == 1
    with pytest.raises(RuntimeError, match="RequestScheduled is not published in batches"):
        bus.subscribe_batches(RequestScheduled, lambda drops, parent: None)
