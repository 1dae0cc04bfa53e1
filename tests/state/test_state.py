"""Saved state in process: pause and resume, what a saved request keeps, and clear errors for a
state directory that cannot be used."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from eclaw import ConfigError, Engine, Request, Response, Spider
from eclaw.core.state import CrawlState
from eclaw.events import ItemStored
from eclaw.frontier.dupefilter import BloomDupeFilter, SetDupeFilter
from eclaw.frontier.serial import dumps, from_text
from eclaw.testing import serve
from tests.conftest import assert_accounted
from tests.state.site import PAGES, StateSpider, expected, make_app


def engine(tmp: Path, *outputs: str, **overrides: Any) -> Engine:
    settings = {"checkpoint_interval": 0.1, "store": "", "failures": str(tmp / "failures.jsonl"), **overrides}
    return Engine(outputs=[str(tmp / o) for o in outputs], state_dir=tmp / "state", overrides=settings)


async def crawl_until(
    tmp: Path, base: str, items: int | None, *outputs: str, stored: asyncio.Event | None = None
) -> Any:
    """Crawl, stopping (pausing) once ``items`` more items are stored; to the end if None. ``stored`` is
    set once an item is stored (the crawl holds its state dir by then)."""
    eng = engine(tmp, *outputs)
    seen = 0

    async def pause(event: ItemStored) -> None:
        nonlocal seen
        seen += 1
        if stored is not None:
            stored.set()
        if seen == items:
            eng.stop("paused by the test")

    eng.subscribe(ItemStored, pause)
    async with eng:
        return await eng.crawl(StateSpider, base_url=base)


async def test_pause_and_resume_in_process_json_and_csv_outputs_stay_whole(tmp_path: Path) -> None:
    parsed, failed = expected()
    async with serve(make_app(delay=0.005)) as base:
        first = await crawl_until(tmp_path, base, 150, "items.json", "items.csv")
        assert first.finish_reason == "paused by the test" and first.requests_pending
        second = await crawl_until(tmp_path, base, 250, "items.json", "items.csv")
        assert second.items_stored >= 400  # counts go on from the saved ones
        last = await crawl_until(tmp_path, base, None, "items.json", "items.csv")
    assert last.finish_reason == "finished"
    assert_accounted(last)  # across the three runs: every request ended exactly once
    assert last.requests_parsed == len(parsed) and last.requests_failed == len(failed)
    rows = json.loads((tmp_path / "items.json").read_text())  # one valid array, not three
    assert sorted(row["page"] for row in rows) == sorted(parsed)
    with (tmp_path / "items.csv").open(newline="") as file:
        lines = file.read().splitlines()
    assert lines[0] == "page,title,origin" and lines.count("page,title,origin") == 1
    assert sorted(int(row["page"]) for row in csv.DictReader(lines)) == sorted(parsed)


async def test_a_state_saved_with_json_records_resumes_and_a_cut_record_is_a_clear_error(tmp_path: Path) -> None:
    """Saved requests are lines (a plain link as tab-separated fields); a state directory of the
    previous version, every request a JSON record, resumes as well."""
    parsed, _ = expected()
    spider = StateSpider()
    async with serve(make_app(delay=0.005)) as base:
        await crawl_until(tmp_path, base, 150, "items.jsonl")
        with closing(sqlite3.connect(tmp_path / "state" / "state.sqlite")) as db, db:
            rows = db.execute("SELECT id, record FROM requests").fetchall()
            plain = [(row_id, record) for row_id, record in rows if not record.startswith("{")]
            assert plain and all(record.split("\t")[-1] == str(row_id) for row_id, record in plain)
            old = [(dumps(from_text(record, spider), spider), row_id) for row_id, record in rows]
            db.executemany("UPDATE requests SET record = ? WHERE id = ?", old)
        last = await crawl_until(tmp_path, base, None, "items.jsonl")
    assert last.finish_reason == "finished" and last.requests_parsed == len(parsed)
    assert_accounted(last)
    pages = [json.loads(line)["page"] for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert sorted(pages) == sorted(parsed)

    (tmp_path / "cut").mkdir()
    async with serve(make_app(delay=0.005)) as base:
        await crawl_until(tmp_path / "cut", base, 50, "items.jsonl")
        with closing(sqlite3.connect(tmp_path / "cut" / "state" / "state.sqlite")) as db, db:
            db.execute("UPDATE requests SET record = 'http://127.0.0.1/cut' WHERE id = (SELECT max(id) FROM requests)")
        with pytest.raises(ConfigError, match=r"state dir .* is corrupt \(request \d+: .*\); remove it"):
            await engine(tmp_path / "cut", "items.jsonl").crawl(StateSpider, base_url=base)


async def test_a_finished_crawl_says_so_and_does_nothing(tmp_path: Path) -> None:
    async with serve(make_app(delay=0)) as base:
        await crawl_until(tmp_path, base, None, "items.jsonl")
        again = await crawl_until(tmp_path, base, None, "items.jsonl")
    assert again.finish_reason == "already finished"
    assert again.items_stored == len(expected()[0])
    assert len((tmp_path / "items.jsonl").read_text().splitlines()) == len(expected()[0])


async def test_saved_requests_keep_priority_depth_callback_meta_kwargs_and_retry_count(tmp_path: Path) -> None:
    spider = StateSpider()
    state = CrawlState(tmp_path / "state", spider)
    assert (await state.open(lambda: None)).status == "new"
    request = Request(
        "http://127.0.0.1:1/p/3",
        callback=spider.parse_page,
        errback=spider.parse_page,
        priority=5,
        depth=2,
        meta={"retry_times": 2, "tag": ["a", 1]},
        cb_kwargs={"origin": "saved"},
        headers={"X-Test": "1"},
    )
    unsaved = Request("http://127.0.0.1:1/p/4", callback=lambda response: None)
    state.assign([request, unsaved])
    state.accepted(request)
    state.accepted(unsaved)  # a lambda cannot be stored by name: counted, not saved
    await state.save(state.snapshot(status="paused", stats={}, start_done=True, outputs={}, dupefilter=None))
    await state.close()

    state = CrawlState(tmp_path / "state", spider)
    saved = await state.open(lambda: None)
    assert (saved.status, saved.start_done, saved.pending) == ("paused", True, 1)
    [[loaded]] = [batch async for batch in state.pending_requests()]
    await state.close()
    assert (loaded.url, loaded.priority, loaded.depth) == (request.url, 5, 2)
    assert loaded.callback == spider.parse_page and loaded.errback == spider.parse_page
    assert loaded.meta == {"retry_times": 2, "tag": ["a", 1]} and loaded.cb_kwargs == {"origin": "saved"}
    assert loaded.headers == {"X-Test": "1"}


def test_dupe_filters_round_trip() -> None:
    for made in (BloomDupeFilter(1000, 1e-6), SetDupeFilter()):
        for n in range(500):
            made.add(str(n).encode())
        copy = BloomDupeFilter(10) if isinstance(made, BloomDupeFilter) else SetDupeFilter()
        file = io.BytesIO()
        made.dump(file)
        file.seek(0)
        copy.load(file)
        assert len(copy) == 500
        assert not copy.add(b"42") and copy.add(b"new")
    with pytest.raises(ValueError, match="not a duplicate filter of this eclaw version"):
        BloomDupeFilter(10).load(io.BytesIO(b"\x00" * 64))  # e.g. one saved by an older eclaw


async def test_another_spiders_state_is_refused(tmp_path: Path) -> None:
    class Other(Spider):
        name = "other"
        start_urls = ["http://127.0.0.1:1/"]

    async with serve(make_app(delay=0)) as base:
        await crawl_until(tmp_path, base, None, "items.jsonl")
    with pytest.raises(ConfigError, match=r"holds a crawl of spider 'state-site', not 'other'"):
        await engine(tmp_path).crawl(Other)


@pytest.mark.parametrize("damage", [b"not a database at all" * 100, b""])
async def test_a_corrupt_state_is_a_clear_error(tmp_path: Path, damage: bytes) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "state.sqlite").write_bytes(damage)
    if not damage:  # a state whose stats are not JSON
        state = CrawlState(tmp_path / "state", StateSpider())
        await state.open(lambda: None)
        await state.close()
        with closing(sqlite3.connect(tmp_path / "state" / "state.sqlite")) as db, db:
            db.execute("INSERT INTO meta VALUES ('stats', '{not json')")
    with pytest.raises(ConfigError, match=r"state dir .* is corrupt \(.*\); remove it to start the crawl over"):
        await engine(tmp_path).crawl(StateSpider)


async def test_a_saved_callback_the_spider_lost_is_a_clear_error(tmp_path: Path) -> None:
    class Renamed(StateSpider):
        parse_page = None  # type: ignore[assignment]

        def parse(self, response: Response) -> Any:
            yield {"url": response.url}

    async with serve(make_app(delay=0.005)) as base:
        await crawl_until(tmp_path, base, 50, "items.jsonl")
        with pytest.raises(ConfigError, match=r"needs callback 'parse_page', which spider 'state-site' does not have"):
            await engine(tmp_path, "items.jsonl").crawl(Renamed, base_url=base)


async def test_one_state_dir_one_running_crawl(tmp_path: Path) -> None:
    async with serve(make_app(delay=0.01)) as base:
        stored = asyncio.Event()
        first = asyncio.create_task(crawl_until(tmp_path, base, None, "a.jsonl", stored=stored))
        await asyncio.wait_for(stored.wait(), 60)  # the first crawl is under way
        with pytest.raises(ConfigError, match=r"is in use by another running crawl"):
            await engine(tmp_path, "b.jsonl").crawl(StateSpider, base_url=base)
        stats = await first
    assert stats.requests_parsed == PAGES - len(expected()[1])


def test_parquet_output_is_refused_with_state(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ParquetExporter.* cannot be resumed"):
        engine(tmp_path, "items.parquet").prepare(StateSpider)


async def test_a_redirect_target_made_seen_by_a_request_still_pending_stays_that_requests_to_parse(
    tmp_path: Path,
) -> None:
    """A checkpoint taken between a redirect (its end marked seen in the dupe filter) and the parse of
    the page saves the request as pending with its mark: resumed, the page is seen, but its own."""
    state = CrawlState(tmp_path / "state", StateSpider())
    await state.open(lambda: None)
    moved, other = Request("http://a.test/old"), Request("http://a.test/other")
    state.assign([moved, other])
    state.accepted(moved)
    state.accepted(other)
    state.marked(moved, b"\x01" * 20)
    await state.save(state.snapshot(status="running", stats={}, start_done=True, outputs={}, dupefilter=None))
    await state.close()
    again = CrawlState(tmp_path / "state", StateSpider())
    await again.open(lambda: None)
    try:
        assert again.marked_by(moved) == b"\x01" * 20 and again.marked_by(other) is None
        again.done(moved)
        assert again.marked_by(moved) is None  # ended: forgotten, and not saved again
    finally:
        await again.close()
