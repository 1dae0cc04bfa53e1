"""Crash safety: a CLI crawl killed with SIGKILL at several points, then resumed, writes every
page's item exactly once; a SIGINT pauses it and the same command resumes it."""

from __future__ import annotations

import asyncio
import csv
import json
import random
import signal
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from eclaw.testing import serve
from tests.forkserver import PIPE, Child, spawn
from tests.state.site import expected, make_app

SPIDER = str(Path(__file__).with_name("site.py")) + ":StateSpider"


async def start(base: str, tmp: Path, *, mark_at: int | None = None) -> Child:
    """``eclaw crawl --state`` of the state site (forked from the fork server: a process of its own)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[2])}
    if mark_at is not None:
        env |= {"STATE_TEST_MARK": str(tmp / "marker"), "STATE_TEST_MARK_AT": str(mark_at)}
    return await spawn(
        "crawl", SPIDER, "-a", f"base_url={base}", "--state", str(tmp / "state"),
        "-o", str(tmp / "items.jsonl"), "-o", str(tmp / "items.csv"), "-o", str(tmp / "items.sqlite"),
        "-s", "checkpoint_interval=0.2", "-s", f"failures={tmp / 'failures.jsonl'}",
        "-s", f"dead_letter={tmp / 'dead.jsonl'}", "-s", "store=", "--log-level", "WARNING",
        cwd=tmp, env=env, stdout=PIPE, stderr=PIPE,
    )  # fmt: skip


def pages_written(tmp: Path) -> list[int]:
    """The pages in items.jsonl; every line must be whole JSON (no partial line after a crash)."""
    path = tmp / "items.jsonl"
    return [json.loads(line)["page"] for line in path.read_text().splitlines()] if path.exists() else []


async def wait_for(condition: Callable[[], bool]) -> None:
    for _ in range(3000):  # a minute at most
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


async def kill_when(process: Child, condition: Callable[[], bool]) -> None:
    await wait_for(condition)
    process.kill()  # SIGKILL: no clean-up of any kind
    await process.wait()


async def finish(base: str, tmp: Path) -> str:
    process = await start(base, tmp)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-2000:]
    return stdout.decode()


def assert_exactly_once(tmp: Path) -> None:
    parsed, failed = expected()
    pages = pages_written(tmp)
    assert len(pages) == len(set(pages)), "an item was written twice"
    assert set(pages) == parsed, f"missing: {sorted(parsed - set(pages))[:10]}"
    with (tmp / "items.csv").open(newline="") as file:
        rows = [int(row["page"]) for row in csv.DictReader(file)]
    assert sorted(rows) == sorted(parsed)
    with closing(sqlite3.connect(tmp / "items.sqlite")) as db:
        stored = [json.loads(data)["page"] for (data,) in db.execute("SELECT data FROM items")]
    assert sorted(stored) == sorted(parsed)
    failures = [json.loads(line)["url"] for line in (tmp / "failures.jsonl").read_text().splitlines()]
    assert sorted(int(url.rsplit("/", 1)[1].partition("#")[0]) for url in failures) == sorted(failed)


async def test_sigkill_early_in_a_pipeline_write_and_midway_then_resume(tmp_path: Path) -> None:
    async with serve(make_app()) as base:
        process = await start(base, tmp_path)  # early: a few items in
        await kill_when(process, lambda: len(pages_written(tmp_path)) >= 5)

        todo = sorted(expected()[0] - set(pages_written(tmp_path)))
        mark = todo[len(todo) // 2]  # in the middle of the pipelines, storing this page's item
        process = await start(base, tmp_path, mark_at=mark)
        await kill_when(process, (tmp_path / "marker").exists)

        before = len(pages_written(tmp_path))  # what was written, committed or not
        target = before + (len(expected()[0]) - before) // 3
        process = await start(base, tmp_path)  # midway, wherever the crawl happens to be
        await kill_when(process, lambda: len(pages_written(tmp_path)) >= target)

        text = await finish(base, tmp_path)
        assert "finish reason       finished" in text or "finished" in text
        assert_exactly_once(tmp_path)
        assert "already finished" in await finish(base, tmp_path)
    assert_exactly_once(tmp_path)


async def test_sigint_pauses_and_the_same_command_resumes(tmp_path: Path) -> None:
    async with serve(make_app()) as base:
        process = await start(base, tmp_path)
        await wait_for(lambda: len(pages_written(tmp_path)) >= 100)
        process.send_signal(signal.SIGINT)
        stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, stderr.decode()
        assert "crawl paused: state saved in" in stdout.decode()
        paused = pages_written(tmp_path)
        assert 100 <= len(paused) < len(expected()[0])

        text = await finish(base, tmp_path)
        assert "requests generated" in text and "crawl paused" not in text
        assert_exactly_once(tmp_path)
        text = await finish(base, tmp_path)
        assert "already finished" in text


async def test_cli_errors_are_one_line_for_another_spiders_state_and_a_corrupt_one(tmp_path: Path) -> None:
    other = tmp_path / "other.py"
    other.write_text("from eclaw import Spider\nclass Other(Spider):\n    name = 'other'\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / "state.sqlite").write_bytes(b"garbage" * 1000)

    async def other_crawl() -> list[str]:
        process = await spawn(
            "crawl", str(other), "--state", str(state), "-s", "store=", cwd=tmp_path, stdout=PIPE, stderr=PIPE
        )
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 2
        return stderr.decode().strip().splitlines()

    [line] = await other_crawl()
    assert "is corrupt" in line and "remove it to start the crawl over" in line
    (state / "state.sqlite").unlink()
    await (await start("http://127.0.0.1:1", tmp_path)).communicate()  # a sound state of spider state-site
    [line] = await other_crawl()
    assert "holds a crawl of spider 'state-site', not 'other'" in line


async def test_sigkill_at_random_moments_then_resume(tmp_path: Path) -> None:
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    async with serve(make_app()) as base:
        for _ in range(4):
            process = await start(base, tmp_path)
            try:  # a crawl of the site takes ~2 s (a forked command starts at once)
                await asyncio.wait_for(process.wait(), rng.uniform(0.15, 1.65))
            except TimeoutError:
                process.kill()
                await process.wait()
            else:  # it ended by itself: it finished (or had finished already)
                assert process.returncode == 0
        await finish(base, tmp_path)
    try:
        assert_exactly_once(tmp_path)
    except AssertionError as exc:
        raise AssertionError(f"seed {seed}: {exc}") from None
