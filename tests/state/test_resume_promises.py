"""Resume promises the other state tests let through: outputs cut back when the resumed run
writes less than the dead one did; exactly-once output when async-generator callbacks await
between their items while SIGKILLs land at random moments; checkpoints by request count;
no start request taken twice; a crawl its spider closed is finished; a damaged output refused."""

from __future__ import annotations

import asyncio
import csv
import json
import random
import sqlite3
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from eclaw import CloseSpider, ConfigError, Engine, Request, Response
from eclaw.events import ItemStored
from eclaw.outputs.build import output_for
from eclaw.testing import serve
from tests.forkserver import PIPE, Child, spawn
from tests.state.archive import LOREM, Archive, RecordSpider, records

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


# -- one output, cut back by hand ------------------------------------------------------------------


def long_item(n: int) -> dict[str, Any]:
    return {"record": f"old-{n}", "title": "Akte", "text": LOREM * 40}


def short_item(n: int) -> dict[str, Any]:
    return {"record": f"new-{n}", "title": "Akte", "text": "kurz"}


def read_back(path: Path) -> list[str]:
    """The records in ``path``, whatever its format; every line must parse."""
    if path.suffix == ".jsonl":
        return [json.loads(line)["record"] for line in path.read_text().splitlines()]
    if path.suffix == ".json":
        return [row["record"] for row in json.loads(path.read_text())]
    if path.suffix == ".csv":
        with path.open(newline="") as file:
            lines = file.read().splitlines()
        assert lines.count("record,title,text") == 1, lines[:3]
        return [row["record"] for row in csv.DictReader(lines)]
    db = sqlite3.connect(path)
    try:
        return [json.loads(data)["record"] for (data,) in db.execute("SELECT data FROM items ORDER BY id")]
    finally:
        db.close()


async def checkpointed(output: Any) -> dict[str, Any]:
    flush = getattr(output, "flush", None)
    if flush is not None:
        await flush()
    return output.checkpoint()  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", ["items.jsonl", "items.csv", "items.json", "items.sqlite"])
async def test_an_output_resumed_with_fewer_bytes_keeps_nothing_after_its_checkpoint(tmp_path: Path, name: str) -> None:
    """A crawl died after writing three long items past its checkpoint; the resumed run writes
    one short one. The output must hold the committed items and the new one: no stale tail."""
    path, spider = tmp_path / name, RecordSpider()

    async def publish(event: Any) -> None:
        pass

    crawl = SimpleNamespace(
        spider=spider, stats=SimpleNamespace(counters=Counter(), finish_reason="shutdown"), publish=publish
    )  # what outputs read
    first = output_for(path)
    await first.open(crawl)  # type: ignore[arg-type]
    for n in range(2):
        await first.process_item(long_item(n), spider)
    saved = await checkpointed(first)
    for n in range(2, 5):  # written, never committed: the crawl dies here
        await first.process_item(long_item(n), spider)
    await checkpointed(first)  # ... after they reached the disk
    await first.close()
    dead_size = path.stat().st_size

    resumed = output_for(path)
    resumed.restore(saved)  # type: ignore[attr-defined]
    await resumed.open(crawl)  # type: ignore[arg-type]
    await resumed.process_item(short_item(0), spider)
    await resumed.close()

    assert read_back(path) == ["old-0", "old-1", "new-0"]
    if not name.endswith(".sqlite"):
        assert path.stat().st_size < dead_size


# -- end to end: a CLI crawl killed, the site changed, the crawl resumed -------------------------


FLAT = ("items.jsonl", "items.csv", "items.sqlite")
ROTATING = ("items-%(batch)02d.jsonl", "items-%(batch)02d.csv")


async def start(
    spider: str, base: str, tmp: Path, *settings: str, outputs: tuple[str, ...] = FLAT
) -> Child:
    """``eclaw crawl --state`` of the archive (forked from the fork server: a process of its own)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    files = [arg for name in outputs for arg in ("-o", str(tmp / name))]
    if outputs == ROTATING:
        files += ["-s", "output_batch_items=5"]
    return await spawn(
        "crawl", f"{HERE / 'archive.py'}:{spider}", "-a", f"base_url={base}",
        "--state", str(tmp / "state"), *files, "-s", f"failures={tmp / 'failures.jsonl'}",
        "-s", f"dead_letter={tmp / 'dead.jsonl'}", "-s", "store=", "--log-level", "WARNING", *settings,
        cwd=tmp, env=env, stdout=PIPE, stderr=PIPE,
    )  # fmt: skip


def lines_in(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def rows_in(path: Path) -> int:
    if not path.exists():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT count(*) FROM items").fetchone()[0])
    except sqlite3.Error:  # not created yet, or locked for a moment
        return 0
    finally:
        db.close()


async def wait_for(condition: Any, seconds: float = 60) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


async def finish(process: Child) -> str:
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-2000:]
    return stdout.decode()


def outputs(tmp: Path) -> dict[str, list[Any]]:
    """What each output holds: JSONL and CSV rows (of every rotated file, in order), store rows.
    Every line must parse."""
    found: dict[str, list[Any]] = {}
    for path in sorted(tmp.glob("items*.jsonl")):
        found[path.name] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for path in sorted(tmp.glob("items*.csv")):
        with path.open(newline="", encoding="utf-8") as file:
            found[path.name] = list(csv.DictReader(file))
    if (tmp / "items.sqlite").exists():
        db = sqlite3.connect(tmp / "items.sqlite")
        found["items.sqlite"] = [json.loads(data) for (data,) in db.execute("SELECT data FROM items")]
        db.close()
    return found


def jsonl_bytes(tmp: Path) -> int:
    return sum(path.stat().st_size for path in tmp.glob("items*.jsonl"))


def written_lines(tmp: Path) -> int:
    return sum(lines_in(path) for path in tmp.glob("items*.jsonl"))


@pytest.mark.parametrize("files", [FLAT, ROTATING], ids=["flat", "rotating"])
async def test_killed_crawl_resumed_against_a_shrunken_site_keeps_no_stale_item(
    tmp_path: Path, files: tuple[str, ...]
) -> None:
    """Every record is written (long) past the last checkpoint, and committed to the store, then
    the crawl is SIGKILLed. Meanwhile half the records are withdrawn and the rest shortened: the
    resumed run writes fewer items and fewer bytes (and fewer rotated files), and the outputs
    must hold exactly its items."""
    archive = Archive()
    archive.slow = 1.2 if "items.sqlite" in files else 0.0  # the store commits a batch a second
    everything = len(records())
    async with serve(archive.app()) as base:
        process = await start("RecordSpider", base, tmp_path, "-s", "checkpoint_interval=60", outputs=files)
        try:
            await wait_for(
                lambda: (
                    written_lines(tmp_path) == everything
                    and ("items.sqlite" not in files or rows_in(tmp_path / "items.sqlite") == everything)
                    and archive.hits["/hang"] == 1
                )
            )
        finally:
            process.kill()
            await process.wait()
        before = outputs(tmp_path)
        assert sum(len(rows) for name, rows in before.items() if name.endswith(".csv")) == everything
        big = jsonl_bytes(tmp_path)

        archive.long, archive.withdrawn, archive.hang, archive.slow = False, True, False, 0.0
        await finish(await start("RecordSpider", base, tmp_path, outputs=files))

    kept = sorted(r for r in records() if int(r.split("-")[1]) % 2 == 0)
    after = outputs(tmp_path)
    if files == ROTATING:  # 24 records were 5 files of each kind; the 12 kept are 3
        assert sorted(after) == sorted(f"items-{n:02d}.{ext}" for ext in ("csv", "jsonl") for n in (1, 2, 3))
        after = {
            ext: [row for name, rows in after.items() if name.endswith(ext) for row in rows] for ext in ("csv", "jsonl")
        }
    for name, rows in after.items():
        assert sorted(row["record"] for row in rows) == kept, name
        assert {row["text"] for row in rows} == {"kurz"}, name
    assert jsonl_bytes(tmp_path) < big
    failures = (tmp_path / "failures.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["url"].rsplit("/", 1)[1] for line in failures) == sorted(set(records()) - set(kept))


# -- exactly once with callbacks that await between their items ---------------------------------


async def test_async_generator_callbacks_under_random_sigkills_write_each_item_once(tmp_path: Path) -> None:
    """Callbacks that await between their three items, checkpoints every 50 ms, three SIGKILLs
    at (seeded) random moments, then a run to the end: each item exactly once in every output."""
    archive = Archive(shelves=20, per_shelf=30, delay=0.01)
    archive.hang = False
    rng = random.Random(20261130)
    settings = ("-s", "checkpoint_interval=0.05")
    async with serve(archive.app()) as base:
        killed = 0
        for _ in range(3):
            process = await start("AsyncRecordSpider", base, tmp_path, *settings)
            try:  # the whole crawl takes ~2 s (a forked command starts at once)
                await asyncio.wait_for(process.wait(), rng.uniform(0.3, 0.9))
            except TimeoutError:
                process.kill()
                await process.wait()
                killed += 1
        await finish(await start("AsyncRecordSpider", base, tmp_path, *settings))
    assert killed >= 2  # the test is only worth its time if the kills land inside the crawl
    shelves = range(archive.shelves)
    expected = Counter((f"{n}-{k}", part) for n in shelves for k in range(archive.per_shelf) for part in range(3))
    for name, rows in outputs(tmp_path).items():
        written = Counter((row["record"], int(row["part"])) for row in rows)
        twice = sorted(key for key, n in written.items() if n > 1)
        assert not twice, f"{name}: {sum(written.values()) - len(written)} items written twice, e.g. {twice[:5]}"
        assert written == expected, f"{name}: missing {sorted(set(expected) - set(written))[:5]}"


# -- checkpoints by count, start requests, CloseSpider, a damaged output -------------------------------


async def test_checkpoint_requests_bounds_the_work_redone_after_a_kill(tmp_path: Path) -> None:
    """A chain of 20 shelves of 4 records (each shelf: 5 new requests), checkpoint_requests=5 and
    no timer checkpoint: killed at the end, the resumed run redoes only the last shelves' work."""
    archive = Archive(shelves=20, per_shelf=4, delay=0.005)
    async with serve(archive.app()) as base:
        settings = ("-s", "checkpoint_interval=60", "-s", "checkpoint_requests=5")
        process = await start("RecordSpider", base, tmp_path, *settings)
        try:
            await wait_for(lambda: archive.hits["/hang"] == 1)
        finally:
            process.kill()
            await process.wait()
        archive.hang = False
        await finish(await start("RecordSpider", base, tmp_path, *settings))
    redone = sorted(path for path, n in archive.hits.items() if n > 1)
    assert all(int(path.split("/")[-1].split("-")[0]) >= 12 for path in redone if path != "/hang"), redone
    written = [row["record"] for row in outputs(tmp_path)["items.jsonl"]]
    assert sorted(written) == sorted(f"{n}-{k}" for n in range(20) for k in range(4))


def engine(tmp: Path, **overrides: Any) -> Engine:
    settings = {"checkpoint_interval": 60, "store": "", "failures": "", **overrides}
    return Engine(outputs=[tmp / "items.jsonl"], state_dir=tmp / "state", overrides=settings)


async def crawl(tmp: Path, spider: Any, base: str, *, pause_after: int = 0, **overrides: Any) -> Any:
    """One run of ``spider``, paused once ``pause_after`` items are stored (0: to its end)."""
    eng = engine(tmp, **overrides)
    stored = 0

    async def pause(event: ItemStored) -> None:
        nonlocal stored
        stored += 1
        if stored == pause_after:
            eng.stop("paused by the test")

    eng.subscribe(ItemStored, pause)
    async with eng:
        return await eng.crawl(spider, base_url=base)


class LoginFirst(RecordSpider):
    """Starts, as Scrapy's default start_requests does, with a ``dont_filter`` request."""

    name = "archive-login"

    def start_requests(self) -> Any:
        yield Request(self.start_urls[0], dont_filter=True)


async def test_a_resumed_crawl_takes_no_start_request_again_and_counts_as_one_run(tmp_path: Path) -> None:
    archive = Archive(delay=0.005)
    archive.hang = False
    (tmp_path / "once").mkdir()
    async with serve(archive.app()) as base:
        once = await crawl(tmp_path / "once", LoginFirst, base)
        archive.hits.clear()
        paused = await crawl(tmp_path, LoginFirst, base, pause_after=5)
        assert paused.finish_reason == "paused by the test" and paused.requests_pending
        resumed = await crawl(tmp_path, LoginFirst, base)
    assert archive.hits["/shelf/0"] == 1
    rows = [json.loads(line)["record"] for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert sorted(rows) == sorted(records())
    for count in ("requests_generated", "requests_parsed", "requests_dropped", "items_stored"):
        assert getattr(resumed, count) == getattr(once, count), count


class Withdrawals(RecordSpider):
    """A withdrawn record (404) goes to an errback, which yields a tombstone item for it."""

    name = "archive-withdrawals"

    def parse(self, response: Response) -> Any:
        for href in response.css("a::attr(href)").getall():
            if href.startswith("/record/"):
                yield response.follow(href, callback=self.parse_record, errback=self.tombstone)
            else:
                yield response.follow(href)

    def tombstone(self, failure: Any) -> Any:
        yield {"record": failure.request.url.rsplit("/", 1)[1], "title": None, "text": "withdrawn"}


async def test_requests_ended_by_an_errback_are_not_redone_after_a_resume(tmp_path: Path) -> None:
    archive = Archive(delay=0.005)
    archive.hang, archive.withdrawn = False, True
    failures = {"failures": str(tmp_path / "failures.jsonl")}
    async with serve(archive.app()) as base:
        paused = await crawl(tmp_path, Withdrawals, base, pause_after=12, **failures)
        assert paused.finish_reason == "paused by the test" and paused.requests_pending
        await crawl(tmp_path, Withdrawals, base, **failures)
    withdrawn = sorted(r for r in records() if int(r.split("-")[1]) % 2)
    rows = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert sorted(row["record"] for row in rows) == sorted(records())
    assert sorted(row["record"] for row in rows if row["text"] == "withdrawn") == withdrawn
    assert {archive.hits[f"/record/{r}"] for r in withdrawn} == {1}
    lines = (tmp_path / "failures.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["url"].rsplit("/", 1)[1] for line in lines) == withdrawn


class EnoughAfterTen(RecordSpider):
    name = "archive-enough"
    seen = 0

    def parse_record(self, response: Response) -> Any:
        yield from super().parse_record(response)
        EnoughAfterTen.seen += 1
        if EnoughAfterTen.seen == 10:
            raise CloseSpider("enough records")


async def test_a_crawl_closed_by_its_spider_is_finished_not_paused(tmp_path: Path) -> None:
    archive = Archive(delay=0.005)
    archive.hang = False
    async with serve(archive.app()) as base:
        first = await crawl(tmp_path, EnoughAfterTen, base)
        assert first.finish_reason == "closespider: enough records"
        hits = sum(archive.hits.values())
        again = await crawl(tmp_path, EnoughAfterTen, base)
    assert again.finish_reason == "already finished" and sum(archive.hits.values()) == hits
    assert again.items_stored == first.items_stored


async def test_an_output_shorter_than_the_saved_state_is_a_clear_error(tmp_path: Path) -> None:
    archive = Archive(delay=0.005)
    archive.hang = False
    async with serve(archive.app()) as base:
        await crawl(tmp_path, RecordSpider, base, pause_after=8)
        output = tmp_path / "items.jsonl"
        with output.open("r+b") as file:  # someone edited the file between the runs
            file.truncate(output.stat().st_size // 2)
        with pytest.raises(ConfigError, match=r"output .*items.jsonl is shorter than the saved crawl wrote"):
            await crawl(tmp_path, RecordSpider, base)
