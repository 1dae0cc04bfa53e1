"""One crawl on two processes (``--processes 2``): every page's item once in every output, a pause
(SIGINT) and a kill -9 of the whole crawl resumed with nothing lost or doubled, and bad input one line."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp
import pytest

from eclaw import Request, Settings
from eclaw.frontier.mesh import Mesh
from eclaw.frontier.partition import PartFrontier
from eclaw.processes.crawl import sweep_scratch
from eclaw.testing import serve
from tests.children import children_of
from tests.forkserver import DEVNULL, PIPE, Child, Process, spawn
from tests.inprocess import eclaw_inprocess
from tests.state import chainsite
from tests.state.chainsite import ChainSpider
from tests.state.forks import kill_group
from tests.state.site import expected, make_app

ROOT = Path(__file__).resolve().parents[2]
SPIDER = str(ROOT / "tests/state/site.py") + ":StateSpider"


async def crawl(base: str, tmp: Path, *extra: str) -> Child:
    """``eclaw crawl`` of the state site on two processes (forked from the fork server: a process of its own)."""
    return await spawn(
        "crawl", SPIDER, "-a", f"base_url={base}", "--processes", "2",
        "-o", str(tmp / "items.jsonl"), "-o", str(tmp / "items.csv"), "-s", "store=",
        "-s", f"failures={tmp / 'failures.jsonl'}",
        "--log-level", "WARNING", "-q", *extra,
        cwd=tmp, stdout=PIPE, stderr=PIPE, start_new_session=True,
    )  # fmt: skip


async def finished(process: Process, what: str, seconds: float = 180) -> str:
    """The crawl's stdout once it exits; on a timeout, what it said on stderr (and it is killed)."""
    try:
        out, err = await asyncio.wait_for(process.communicate(), seconds)
    except TimeoutError:
        os.killpg(process.pid, signal.SIGKILL)
        _, err = await process.communicate()
        raise AssertionError(f"{what}: still running after {seconds} s; stderr: {err.decode()[-3000:]}") from None
    assert process.returncode == 0, f"{what}: exit {process.returncode}: {err.decode()[-3000:]}"
    return out.decode()


def failed_in(tmp: Path) -> list[int]:
    urls = [json.loads(line)["url"] for line in (tmp / "failures.jsonl").read_text().splitlines()]
    return sorted(int(url.rsplit("/", 1)[1].partition("#")[0]) for url in urls)


def counts(out: str) -> dict[str, int]:
    """The summary's request counts: generated, and how many were parsed, failed, dropped or are pending."""

    def count(name: str) -> int:
        found = re.search(rf"^\s*{name}\s+(\d+)$", out, re.MULTILINE)
        return int(found.group(1)) if found else 0

    names = {"generated": "requests generated", "pending": r"pending \(not crawled\)"}
    return {key: count(names.get(key, key)) for key in ("generated", "parsed", "failed", "dropped", "pending")}


def accounted(out: str) -> int:
    """The summary's pending requests, once it is checked that every request generated is parsed,
    failed, dropped or pending."""
    found = counts(out)
    assert found["generated"] and found["generated"] == sum(found.values()) - found["generated"], out
    return found["pending"]


def pages_in(tmp: Path) -> tuple[list[int], list[int]]:
    jsonl = [json.loads(line)["page"] for line in (tmp / "items.jsonl").read_text().splitlines()]
    with (tmp / "items.csv").open(newline="") as handle:
        rows = [int(row["page"]) for row in csv.DictReader(handle)]
    return sorted(jsonl), sorted(rows)


async def test_two_processes_crawl_every_page_once_into_every_output(tmp_path: Path) -> None:
    parsed, failed = expected()
    async with serve(make_app(delay=0.0)) as base:
        for run in ("the crawl", "the same crawl again"):  # the second run's files replace the first's
            out = await finished(await crawl(base, tmp_path), run)
            assert pages_in(tmp_path) == (sorted(parsed), sorted(parsed))
            assert failed_in(tmp_path) == sorted(failed)  # each process's failures, gathered into the crawl's
            assert "written to" in out and re.search(r"finish reason\s+finished", out)


async def started(process: Child, state: Path) -> None:
    """Wait until both processes are crawling (each has written items)."""
    items = [state / f"part-{k}" / "items.jsonl" for k in (0, 1)]
    for _ in range(600):
        if all(path.exists() and path.stat().st_size for path in items):
            await asyncio.sleep(0.5)
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the crawl never started")


async def test_a_ctrl_c_as_the_processes_start_stops_the_crawl_as_a_ctrl_c_later_does(tmp_path: Path) -> None:
    """Ctrl-C the moment the processes are forked, before they have set up their crawls: each stops
    as it would later (exit 0, the summary), none dies of it (a process killed by the signal it was
    passed made the crawl a failure, exit 1)."""
    async with serve(make_app(delay=0.05)) as base:
        for attempt in range(3):
            (tmp_path / str(attempt)).mkdir()
            process = await crawl(base, tmp_path / str(attempt))
            # the signal goes as soon as they exist (a look every 5 ms, far less than a process takes to
            # set up its crawl; looks without a pause cost more CPU than the crawl); a command that ended,
            # or never forks, fails
            deadline = asyncio.get_running_loop().time() + 60
            while len(await asyncio.to_thread(children_of, process.pid)) < 2:
                assert process.returncode is None, (await process.communicate())[1].decode()[-2000:]
                assert asyncio.get_running_loop().time() < deadline, "the command never forked its processes"
                await asyncio.sleep(0.005)
            os.killpg(process.pid, signal.SIGINT)
            out, err = await asyncio.wait_for(process.communicate(), 60)
            assert process.returncode == 0, err.decode()[-2000:]
            assert "Traceback" not in err.decode() and "finish reason" in out.decode(), err.decode()[-2000:]


LATE_STOP = """
import asyncio, os, signal, sys
from eclaw import Engine, Settings, Spider
from eclaw.cli.crawl import crawl_with_signals
from eclaw.processes.fork import SIGNALS, fork, wait_for

class Nothing(Spider):
    name = "nothing"

def run() -> int:
    stats = asyncio.run(crawl_with_signals(Engine(Settings(store="")), Nothing, {}, quiet=True))
    os.kill(os.getpid(), signal.SIGINT)  # the parent stops the others as one ended: this one had too
    print("said", stats.finish_reason, file=sys.stderr, flush=True)  # its stats, as a process writes them
    return 0

signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
sys.exit(asyncio.run(wait_for([fork(run)]))[0])
"""


async def test_a_stop_that_comes_as_a_process_ends_its_crawl_has_nothing_left_to_stop() -> None:
    """A process whose crawl just ended gets the SIGINT the parent sends the others when one ended (its
    budget spent): it says its stats and exits 0 (it raised KeyboardInterrupt there: 'process 1 failed')."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LATE_STOP, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0 and "said finished" in err.decode(), err.decode()[-2000:]


async def test_a_pause_and_a_kill_of_the_whole_crawl_resume_with_each_item_once(tmp_path: Path) -> None:
    parsed, failed = expected()
    state = tmp_path / "state"
    async with serve(make_app(delay=0.05)) as base:
        paused = await crawl(base, tmp_path, "--state", str(state))
        await started(paused, state)
        os.killpg(paused.pid, signal.SIGINT)  # Ctrl-C in the terminal reaches the whole group
        assert "crawl paused" in await finished(paused, "the paused crawl")
        killed = await crawl(base, tmp_path, "--state", str(state))
        await started(killed, state)
        await kill_group(killed)  # the parent and its processes, at once
        await finished(await crawl(base, tmp_path, "--state", str(state)), "the resumed crawl")
    assert pages_in(tmp_path) == (sorted(parsed), sorted(parsed))
    assert failed_in(tmp_path) == sorted(failed)


async def test_bad_process_counts_are_one_line(tmp_path: Path) -> None:
    two = tmp_path / "two"
    (two / "mesh").mkdir(parents=True)
    (two / "mesh" / "count").write_text("2")  # a crawl saved on two processes
    one = tmp_path / "one"
    one.mkdir()
    (one / "state.sqlite").write_text("")  # ... and one saved on one
    for extra, said in (
        (["--processes", "0"], "--processes expects"),
        (["--processes", "2", "--redis", "redis://127.0.0.1:9/0"], "not with --redis"),
        (["--processes", "3", "--state", str(two)], "resume it with --processes 2"),
        (["--state", str(two)], "resume it with --processes 2"),
        (["--processes", "2", "--state", str(one)], "resume it with --processes 1"),
        (["--processes", "2", "--trace", str(tmp_path / "trace.jsonl")], "--trace"),
    ):
        code, _, err = await eclaw_inprocess("crawl", SPIDER, *extra)  # refused before any process is forked
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and said in lines[0], (extra, err)


CHAIN = str(ROOT / "tests/state/chainsite.py") + ":ChainSpider"


async def crawl_chain(base: str, tmp: Path, *extra: str, processes: str = "2") -> str:
    process = await spawn(
        "crawl", CHAIN, "-a", f"base_url={base}", "--processes", processes,
        "-o", str(tmp / "chain.jsonl"), "-o", str(tmp / "chain.csv"), "-s", "store=", "-q", *extra,
        cwd=tmp, stdout=PIPE, stderr=PIPE, start_new_session=True,
    )  # fmt: skip
    return await finished(process, "the chain crawl")


def chain_items(tmp: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (tmp / "chain.jsonl").read_text(encoding="utf-8").splitlines()]


async def test_a_chain_handed_back_and_forth_through_redirects_ends_with_each_page_once(tmp_path: Path) -> None:
    """Each page's only way on leads, about one time in two, into the other process's part, and its
    redirect too: the crawl must neither end early nor fetch a page twice (each is linked and redirected to)."""
    async with serve(chainsite.make_app()) as base:
        out = await crawl_chain(base, tmp_path)
    items = chain_items(tmp_path)
    assert sorted(item["n"] for item in items) == list(range(chainsite.PAGES)), out
    assert {item["title"] for item in items} >= {"Café n°0", f"Café n°{chainsite.PAGES - 1}"}
    with (tmp_path / "chain.csv").open(newline="", encoding="utf-8") as handle:
        assert sorted(int(row["n"]) for row in csv.DictReader(handle)) == list(range(chainsite.PAGES))
    assert re.search(r"redirected to another process\s+[1-9]", out), out  # the hand-over happened


async def test_a_host_allowed_one_connection_gets_one_from_the_whole_crawl(tmp_path: Path) -> None:
    async with serve(chainsite.make_app(delay=0.004)) as base:  # 4 ms: two requests at once would overlap
        await crawl_chain(base, tmp_path, "-s", "concurrency_per_domain=1")
        async with aiohttp.ClientSession() as session, session.get(base + "/most") as answer:
            most = int(await answer.text())
    assert most == 1
    assert sorted(item["n"] for item in chain_items(tmp_path)) == list(range(chainsite.PAGES))


async def test_a_budget_stops_every_process_and_keeps_what_was_crawled(tmp_path: Path) -> None:
    async with serve(chainsite.make_app(delay=0.01)) as base:
        out = await crawl_chain(base, tmp_path, "-s", "max_pages=40")
    pages = [item["n"] for item in chain_items(tmp_path)]
    # max_pages is the downloads started, at most (no more in flight past it); a download of a /go/ redirect
    # to a page already seen counts and yields no item, so fewer items than 40, never more
    assert 10 <= len(pages) <= 40 and len(set(pages)) == len(pages)
    assert re.search(r"finish reason\s+max pages", out), out
    accounted(out)  # links sent to a process that stopped before reading them are pending


@pytest.mark.parametrize("processes", ["1", "2"])
async def test_kills_at_random_moments_of_a_crawl_of_redirects_lose_and_double_nothing(
    tmp_path: Path, processes: str
) -> None:
    """kill -9 of the whole crawl at random moments while every page is reached both by a link and by a
    redirect (with two processes, handing each other every other link): each resume goes on from what
    was saved, and each page's item is written once. A redirect that made its page seen just before a
    checkpoint, parsed after it, must parse it again when resumed, not drop it as seen."""
    state, rng = tmp_path / "state", random.Random(7)
    async with serve(chainsite.make_app(delay=0.02)) as base:
        for _ in range(3):
            killed = await spawn(
                "crawl", CHAIN, "-a", f"base_url={base}", "--processes", processes,
                "-o", str(tmp_path / "chain.jsonl"), "-s", "store=", "-s", "checkpoint_interval=0.1", "-q",
                "--state", str(state), cwd=tmp_path, stdout=DEVNULL, stderr=DEVNULL, start_new_session=True,
            )  # fmt: skip
            await asyncio.sleep(rng.uniform(0.4, 1.1))  # a forked command starts crawling at once
            await kill_group(killed)  # the chain takes seconds: it is still crawling
        await crawl_chain(base, tmp_path, "--state", str(state), "-s", "checkpoint_interval=0.1", processes=processes)
    assert sorted(item["n"] for item in chain_items(tmp_path)) == list(range(chainsite.PAGES))


def test_every_process_names_the_same_owner_and_a_paced_host_has_one() -> None:
    async def owners() -> None:
        settings = Settings(concurrency_per_domain=8, host_delay="slow.test=1", host_concurrency="one.test=1")
        frontiers = []
        for part in (0, 1):
            frontier = PartFrontier(Mesh(Path(tempfile.mkdtemp()), part, 2))
            await frontier.open(ChainSpider(), settings, lambda: None)
            frontiers.append(frontier)
        try:
            urls = [f"http://a.test/p/{n}?b=2&a=1" for n in range(200)]
            owners = [{s.owner(Request(url)) for s in frontiers} for url in urls]
            assert all(len(found) == 1 for found in owners)  # the same answer in both processes
            spread = [found.pop() for found in owners]
            assert 60 < spread.count(0) < 140  # a shared host's pages go to both
            same = [Request(url.replace("?b=2&a=1", "?a=1&b=2#top")) for url in urls]  # duplicates of them
            assert [frontiers[0].owner(r) for r in same] == spread
            for host in ("slow.test", "one.test"):  # paced as a whole: one process has all its pages
                assert len({frontiers[0].owner(Request(f"http://{host}/{n}")) for n in range(50)}) == 1
            assert frontiers[0]._limits.get("a.test", frontiers[0]._per_host) == 4  # its share of 8
        finally:
            for frontier in frontiers:
                await frontier.close()

    asyncio.run(owners())


def test_scratch_directories_of_killed_crawls_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    """A crawl without --state works in a scratch directory it removes at its end; one killed with
    SIGKILL cannot, so the next crawl removes those whose crawl is gone."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    folders = {name: tmp_path / f"eclaw-crawl-{name}" for name in ("dead", "live", "new")}
    for folder in folders.values():
        (folder / "part-0").mkdir(parents=True)
    (folders["dead"] / "pid").write_text(dead.stdout.strip())  # that process has exited
    (folders["live"] / "pid").write_text(str(os.getpid()))
    assert sweep_scratch(tmp_path) == 1  # "new" has no pid file yet: being made, kept
    assert [name for name, folder in folders.items() if folder.exists()] == ["live", "new"]
