"""Crawling a documentation site whose links carry many ``#anchor`` fragments, in an order that
changes between runs: ``response.url`` is the fetched URL, without a fragment, so items get the
same URLs on every run; ``response.request.url`` keeps the fragment of the link that won."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eclaw import Response, Settings, Spider
from eclaw.cli import main
from eclaw.observe.report import lifecycle, read_trace
from eclaw.stats import Stats
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, read_jsonl
from tests.docsite import MISSING, PAGES, REDIRECT, docs_app, title, toc


class Docs(Spider):
    name = "docs"
    allowed_domains = ["127.0.0.1"]

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url, "requested": response.request.url, "title": response.css("title::text").get()}
        yield from response.follow_all(css="a")


async def crawl(seed: int, tmp: Path) -> tuple[str, dict[str, dict[str, Any]], Stats]:
    """Crawl the site with links in ``seed``'s order; the items by URL."""
    settings = Settings(failures=str(tmp / f"failures-{seed}.jsonl"), trace=str(tmp / f"trace-{seed}.jsonl"))
    async with serve(docs_app(seed)) as base:
        items, stats = await collect(Docs, settings=settings, start_urls=[base + "/index.html"])
    assert_accounted(stats)
    by_url = {item["url"]: item for item in items}
    assert len(by_url) == len(items)  # no page under two URLs
    return base, by_url, stats


async def test_item_urls_are_the_same_whatever_fragment_reached_the_page(tmp_path: Path) -> None:
    runs = {seed: await crawl(seed, tmp_path) for seed in (1, 2)}
    paths = {"/index.html", "/genindex.html", *(f"/{p}" for p in PAGES)}
    requested: dict[int, dict[str, str]] = {}
    for seed, (base, run, stats) in runs.items():
        assert {url.removeprefix(base) for url in run} == paths  # the same URLs, none with a fragment
        assert stats.requests_parsed == len(paths) and stats.failed_by_reason == {"http 404": 1}  # a removed module
        requested[seed] = {url.removeprefix(base): item["requested"].removeprefix(base) for url, item in run.items()}
        for path in PAGES:  # decoded right: windows-1252 by header, ISO-8859-1 by <meta> only
            assert run[f"{base}/{path}"]["title"] == title(path)
        (failure,) = read_jsonl(tmp_path / f"failures-{seed}.jsonl")
        assert failure["url"] == f"{base}/{MISSING}" and failure["reason"] == "http 404"
    for seed, links in requested.items():  # each request kept the fragment of the page's first link in the ToC
        first = {href.partition("#")[0]: href for href in reversed(toc(seed))}
        expected = {f"/{page}": f"/{href}" for page, href in first.items() if page != MISSING}
        expected["/index.html"] = "/index.html"  # the start URL
        expected["/whatsnew/3.11.html"] = expected.pop(f"/{REDIRECT[0]}")  # redirected to a Location with a fragment
        assert links == expected
    assert sum(requested[1][path] != requested[2][path] for path in paths) >= 5  # the order mattered


async def test_trace_records_fetched_urls_and_finds_a_request_by_either_url(tmp_path: Path, capsys: Any) -> None:
    base, run, _ = await crawl(3, tmp_path)
    records = read_trace(tmp_path / "trace-3.jsonl")
    fetched = {"ResponseDownloaded", "ResponseParsed", "ItemStored", "ItemParsed", "RequestFailed"}
    assert {r["event"] for r in records} >= fetched
    assert not [r for r in records if r["event"] in fetched and "#" in r["url"]]
    assert any("#" in r["url"] for r in records if r["event"] == "RequestScheduled")  # the links as written
    assert {r["url"] for r in records if r["event"] == "ResponseDownloaded"} == set(run)
    assert [r["url"] for r in records if r["event"] == "RequestFailed"] == [f"{base}/{MISSING}"]
    page = f"{base}/library/re.html"
    requested = run[page]["requested"]
    assert requested != page  # reached by a link with a fragment
    story = lifecycle(records, url=requested)
    assert story == lifecycle(records, url=page) == lifecycle(records, url=page + "#no-such-anchor")
    assert story.startswith("request ") and "ResponseParsed" in story and "ItemStored" in story
    assert main(["trace", str(tmp_path / "trace-3.jsonl"), "--url", page]) == 0
    assert capsys.readouterr().out.strip() == story
