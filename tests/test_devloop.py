"""The developer loop: eclaw fetch, parse, crawl --record / replay, error snapshots, expect_items.

Against tests/devsite.py, a library catalogue in ISO-8859-1 (not the demo shop).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.cli.main import main
from eclaw.devloop.callback import run_callback
from eclaw.devloop.record import Recorder
from eclaw.devloop.replay import replay
from eclaw.devloop.session import Session, saved_page
from eclaw.observe.snapshots import Snapshots, load_snapshot
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, read_jsonl, record_file
from tests.devsite import Catalogue
from tests.inprocess import eclaw_inprocess

BOOKS_SPIDER = """
    from eclaw import Request, Spider

    class Books(Spider):
        name = "books"
        expect_items = {"parse_book"}

        def start_requests(self):
            yield Request(self.base_url + "/")

        def parse(self, response):
            yield from response.follow_all(css="a.shelf")
            yield from response.follow_all(css="a.book", callback=self.parse_book)
            yield from response.follow_all(css="a[rel=next]")

        def parse_book(self, response):
            if response.css("dl.record"):
                yield {
                    "title": response.css("h1::text").get(),
                    "author": response.css("dd.author::text").get(),
                    "price": float(response.css("dd.price::text").get().split()[0]),
                }
"""


@pytest.fixture
async def site() -> AsyncIterator[tuple[str, Catalogue]]:
    catalogue = Catalogue()
    async with serve(catalogue.app()) as base:
        yield base, catalogue


def listing(folder: Path) -> list[Path]:
    return sorted(folder.iterdir())


def spider_file(tmp_path: Path, source: str = BOOKS_SPIDER, name: str = "books.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


# -- fetch -------------------------------------------------------------------------


async def test_fetch_goes_through_the_spiders_middlewares_and_prints_status_headers_body(
    site: tuple[str, Catalogue], tmp_path: Path
) -> None:
    base, catalogue = site
    agent = 'name = "books"\n        user_agent = "Librarian/1.0"'
    spider = spider_file(tmp_path, BOOKS_SPIDER.replace('name = "books"', agent))
    code, out, err = await eclaw_inprocess("fetch", f"{base}/book/1", "--spider", spider, "--headers")
    assert code == 0, err
    assert "> User-Agent: Librarian/1.0" in out  # the request as the UserAgent middleware sent it
    assert f"200 {base}/book/1" in out and "Content-Type: text/html; charset=iso-8859-1" in out
    assert catalogue.agents[-1] == "Librarian/1.0"
    code, out, err = await eclaw_inprocess("fetch", f"{base}/book/1")
    assert code == 0, err
    assert "<h1>Les Misérables</h1>" in out  # decoded from ISO-8859-1
    code, out, err = await eclaw_inprocess("fetch", f"{base}/binary.pdf", "-o", str(tmp_path / "doc.pdf"))
    assert code == 0, err
    assert (tmp_path / "doc.pdf").read_bytes() == b"%PDF-1.4 binary\x00\x01"
    assert "17 bytes written to" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fetch", "example.com/page"], "has no scheme: did you mean https://example.com/page?"),
        (["parse", "http://127.0.0.1:9/", "--spider", "missing.py"], "spider file not found: missing.py"),
        (["parse", "http://127.0.0.1:9/", "--spider", "{spider}", "-c", "parse_bok"], "has no callback 'parse_bok'"),
        (["parse", "http://127.0.0.1:9/", "--spider", "{spider}", "--meta", "{bad"], "--meta is not JSON"),
        (["parse", "http://127.0.0.1:9/", "--spider", "{spider}", "--meta", "[1]"], "must be a JSON object"),
        (["replay", "{spider}", "--from", "nowhere"], "nowhere is not a recording"),
        (["crawl", "{spider}", "--record", "rec", "--state", "st"], "--record needs the whole crawl"),
        (["crawl", "{spider}", "--record", "rec", "-s", "http_cache=cache"], "not with http_cache or incremental"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spider = spider_file(tmp_path)
    code = main([a.replace("{spider}", spider) for a in args])  # in-process: each fails before any crawl
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1, err


# -- parse -------------------------------------------------------------------------


async def test_parse_prints_items_and_requests_depth_by_depth(site: tuple[str, Catalogue], tmp_path: Path) -> None:
    base, catalogue = site
    spider = spider_file(tmp_path)
    code, out, err = await eclaw_inprocess(
        "parse", f"{base}/shelf/2", "--spider", spider, "-a", "base_url=x", "--depth", "2"
    )
    assert code == 0, err + out
    assert f">>> depth 1: {base}/shelf/2 (parse)" in out
    assert f"GET {base}/book/4  -> parse_book" in out
    assert f">>> depth 2: {base}/book/5 (parse_book)" in out
    assert '{"title": "Kristin Lavransdatter", "author": "Sigrid Undset", "price": 16.9}' in out
    assert catalogue.hits == {"/shelf/2": 1, "/book/4": 1, "/book/5": 1}  # depth 2 stops there


async def test_parse_names_what_is_wrong_and_exits_1(site: tuple[str, Catalogue], tmp_path: Path) -> None:
    base, _ = site
    spider = spider_file(tmp_path)
    code, out, _ = await eclaw_inprocess("parse", f"{base}/book/gone", "--spider", spider, "-c", "parse_book")
    assert code == 1
    assert "no items, where the spider expects some (expect_items)" in out
    code, out, _ = await eclaw_inprocess("parse", f"{base}/shelf/9", "--spider", spider)
    assert code == 1 and "failed: http 404" in out  # the callback would not run in a crawl either
    code, out, _ = await eclaw_inprocess(
        "parse", f"{base}/book/3", "--spider", spider, "-c", "parse_book", "--meta", '{"expect_items": false}'
    )
    assert code == 0 and '"Niels Lyhne"' in out


async def test_run_callback_on_a_saved_page_gives_items_and_requests(tmp_path: Path) -> None:
    page = tmp_path / "shelf.html"
    page.write_bytes('<h1>Shelf 1</h1><a class="book" href="/book/7">Émile</a>'.encode("iso-8859-1"))

    class Shelf(Spider):
        name = "shelf"

        def parse(self, response: Response) -> Any:
            yield {"shelf": response.css("h1::text").get(), "first": response.css("a::text").get()}
            yield from response.follow_all(css="a.book")

    response = saved_page(page, "https://library.test/shelf/1", content_type="text/html; charset=iso-8859-1")
    outputs = await run_callback(Shelf(), response)
    assert outputs.items == [{"shelf": "Shelf 1", "first": "Émile"}]
    assert [(r.url, r.depth) for r in outputs.requests] == [("https://library.test/book/7", 1)]


# -- record and replay -------------------------------------------------------------


async def test_record_then_replay_finds_no_difference_offline_then_names_each_change(
    site: tuple[str, Catalogue], tmp_path: Path
) -> None:
    base, catalogue = site
    spider = spider_file(tmp_path)
    code, out, err = await eclaw_inprocess(
        "crawl", spider, "-a", f"base_url={base}", "--record", "rec/{spider}", "-s", "store=", "-q", "-o", "items.jsonl"
    )
    assert code == 0, err
    assert "eclaw replay" in out and (tmp_path / "rec/books/http-cache.sqlite").exists()
    hits = dict(catalogue.hits)
    code, out, err = await eclaw_inprocess("replay", spider, "--from", "rec/books")
    assert code == 0, out + err
    assert "8 pages (8 recorded), 5 items (5 recorded)" in out and "no differences" in out
    assert catalogue.hits == hits  # offline: not one request reached the site
    changed = (
        BOOKS_SPIDER.replace("split()[0])", "split()[0].replace('.', ''))")  # a parsing bug
        .replace('yield from response.follow_all(css="a[rel=next]")', "")  # pagination lost
        .replace('"author": response.css("dd.author::text").get(),', '"author": response.css("dd.writer::text").get(),')
    )
    code, out, err = await eclaw_inprocess("replay", spider_file(tmp_path, changed, "books2.py"), "--from", "rec/books")
    assert code == 1, out + err
    assert f"~ dict #1 of {base}/book/1\n      author: 'Victor Hugo' -> None\n      price: 12.5 -> 1250.0" in out
    assert f"- GET {base}/shelf/2  (from {base}/shelf/1)" in out  # the next link is no longer followed
    assert "dict: field 'author' empty in 0% -> 100% of items" in out
    assert catalogue.hits == hits


class Book(Spider):
    name = "book"
    item_key = ("isbn",)
    start_urls = ["https://library.test/"]

    def parse(self, response: Response) -> Any:
        for link in response.css("a"):
            yield {"isbn": link.attrib["href"][-1], "title": link.css("::text").get(), "shelf": response.url}
        if response.url.endswith("/"):
            yield response.follow("/more")


async def test_replay_api_diffs_by_item_key_added_removed_changed(tmp_path: Path) -> None:
    from eclaw.testing import MockFetcher

    pages = {
        "https://library.test/": '<a href="/b/1">Candide</a><a href="/b/2">Zadig</a>',
        "https://library.test/more": '<a href="/b/3">Micromégas</a><a href="/b/1">Candide</a>',
    }
    recorder = Recorder(tmp_path / "rec")
    mock = MockFetcher(pages)
    engine = Engine(Settings(store="", snapshots=""), middlewares=recorder.middlewares(), fetcher=lambda: mock)
    recorder.attach(engine)
    async with engine:
        stats = await engine.crawl(Book)
    recorder.save(Book.name, stats)
    assert_accounted(stats)

    class Changed(Book):
        def parse(self, response: Response) -> Any:
            for item in super().parse(response):
                if isinstance(item, dict):
                    if item["isbn"] == "2":
                        continue  # removed
                    item["title"] = item["title"].upper() if item["isbn"] == "3" else item["title"]
                    if item["isbn"] == "3":
                        yield {"isbn": "4", "title": "L'Ingénu", "shelf": response.url}  # added
                yield item

    same = await replay(Book, tmp_path / "rec")
    assert same.diff.empty and same.diff.same == 4  # "1" twice: "dict[1]" and "dict[1] (2)"
    outcome = await replay(Changed, tmp_path / "rec")
    diff = outcome.diff
    assert [i for i, _ in diff.removed] == ["dict[2]"]
    assert [i for i, _ in diff.added] == ["dict[4]"]
    assert diff.changed == [("dict[3]", [("title", "Micromégas", "MICROMÉGAS")])]
    assert len(mock.requests) == 2  # the replays fetched nothing


# -- error snapshots and expect_items ----------------------------------------------


class Fragile(Spider):
    name = "fragile"
    expect_items = {"parse_book"}

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="a.book", callback=self.parse_book)
        yield response.follow("/book/gone", callback=self.parse_book)
        yield response.follow("/book/4", callback=self.parse_broken)

    def parse_book(self, response: Response) -> Any:
        if response.css("dl.record"):
            yield {"title": response.css("h1::text").get()}

    def parse_broken(self, response: Response) -> Any:
        yield {"price": float(response.css("dd.price::text").get())}  # "9.75 EUR": ValueError


async def test_a_failing_callback_and_a_page_without_items_leave_snapshots_named_in_the_log(
    site: tuple[str, Catalogue], caplog: pytest.LogCaptureFixture
) -> None:
    base, _ = site
    items, stats = await collect(Fragile, settings=Settings(store=""), start_urls=[f"{base}/shelf/1"])
    assert_accounted(stats)
    assert len(items) == 3
    assert stats.failed_by_reason == {"no items": 1, "callback error: ValueError": 1}
    assert stats.counters["snapshots saved"] == 2
    folders = listing(Path("eclaw-data/fragile/snapshots"))
    assert len(folders) == 2
    lines = [r.getMessage() for r in caplog.records if "snapshot" in r.getMessage()]
    assert len(lines) == 2 and all(any(str(f) in line for f in folders) for line in lines)
    broken = next(f for f in folders if (f / "traceback.txt").exists())
    record = json.loads((broken / "snapshot.json").read_text())
    assert record["reason"] == "callback error: ValueError" and record["request"]["callback"] == "parse_broken"
    assert record["response"]["status"] == 200 and "could not convert string to float" in record["error"]
    assert "parse_broken" in (broken / "traceback.txt").read_text()
    kept = load_snapshot(broken)  # what eclaw shell FOLDER opens: the page as it was
    assert kept.url == f"{base}/book/4" and kept.css("h1::text").get() == "La Regenta"
    failures = read_jsonl(record_file("fragile", "failures"))
    assert sorted(f["reason"] for f in failures) == ["callback error: ValueError", "no items"]


async def test_snapshots_are_capped_in_count_and_bytes_evicting_older_runs(tmp_path: Path) -> None:
    request = Request("https://library.test/book/1")
    page = Response(request.url, body=b"<h1>x</h1>" * 100, headers={"Content-Type": "text/html"}, request=request)
    old = Snapshots(tmp_path, max_count=3)
    assert all([await old.save(request, page, ValueError("old")) for _ in range(3)])
    assert await old.save(request, page, None) is None  # this run's cap: its first three are kept
    new = Snapshots(tmp_path, max_count=3)
    mine = [await new.save(request, page, None, reason="no items") for _ in range(2)]
    left = listing(tmp_path)
    assert len(left) == 3 and all(m in left for m in mine)  # the two oldest of the old run went
    small = Snapshots(tmp_path / "small", max_bytes=1500)
    assert await small.save(request, page, None) is not None
    assert await small.save(request, page, None) is None  # a second one would pass 1,500 bytes
    assert Snapshots.from_settings(Settings(snapshots=""), "x") is None


async def test_expect_items_naming_no_method_is_a_config_error() -> None:
    from eclaw import ConfigError

    class Typo(Spider):
        name = "typo"
        expect_items = {"parse_prodcut"}
        start_urls = ["https://library.test/"]

    with pytest.raises(ConfigError, match="expect_items names 'parse_prodcut'"):
        Engine(Settings(store="")).prepare(Typo)


async def test_session_fetch_waits_out_retries_and_sees_every_status(site: tuple[str, Catalogue]) -> None:
    base, catalogue = site
    async with Session(overrides={"retries": 0}) as session:
        missing = await session.fetch(Request(f"{base}/shelf/9"))
    assert missing.status == 404 and catalogue.hits["/shelf/9"] == 1
