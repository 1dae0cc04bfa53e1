"""A process of a crawl on two (``--processes 2``) that runs out of work is lent part of the other's
queue: every page is still crawled once, with or without ``--state``, through a kill -9 of the whole
crawl while requests are being lent, and a lent request that fails is retried."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import tempfile
from collections import defaultdict
from pathlib import Path

from aiohttp import web

from eclaw import Request, Settings
from eclaw.frontier.base import Feed
from eclaw.frontier.mesh import LENT, Mesh
from eclaw.frontier.partition import PartFrontier
from eclaw.testing import serve
from tests.conftest import until
from tests.forkserver import PIPE, Child, spawn
from tests.state import lopsided
from tests.state.forks import forked, kill_group
from tests.state.test_processes import accounted, counts, finished

ROOT = Path(__file__).resolve().parents[2]
SPIDER = str(ROOT / "tests/state/lopsided.py") + ":WordSpider"


async def parts_of(urls: list[str]) -> list[int]:
    """The process whose part of a two-process crawl each URL is (what every process of it says)."""
    frontier = PartFrontier(Mesh(Path(tempfile.mkdtemp()), 0, 2))
    await frontier.open(lopsided.WordSpider(), Settings(), lambda: None)
    try:
        return [frontier.owner(Request(url)) for url in urls]
    finally:
        await frontier.close()


class Site:
    """The word list, the pages of process 2's part slow."""

    def __init__(self) -> None:
        self.base = ""
        self.slow: set[str] = set()
        self.served = 0  # entries asked for, every run together
        self.fast: set[str] = set()  # entries of the fast part asked for
        self.crowded = asyncio.Event()  # set when more slow entries are answered at once than one process asks

    def app(self) -> web.Application:
        return lopsided.make_app(self._asked, self._crowd)

    def _crowd(self, answering: int) -> None:
        if answering > 2:  # each process downloads two at once (concurrency=2): the fast one has some
            self.crowded.set()

    async def lending(self) -> None:
        """Wait until the fast process, out of work, downloads pages of the slow part beside the slow
        process: more slow pages answered at once than one process asks for (a generous 60 s bound)."""
        await self.fast_part_done()
        self.crowded.clear()
        await asyncio.wait_for(self.crowded.wait(), 60)

    def _asked(self, path: str) -> bool:
        self.served += 1
        if path not in self.slow:
            self.fast.add(path)
        return path in self.slow

    async def fast_part_done(self) -> None:
        """Wait until every entry of the fast part has been asked for since ``fast`` was cleared: its
        process is out of work, and is lent the slow part's from then on."""
        with contextlib.suppress(TimeoutError):
            await until(lambda: len(self.fast) == lopsided.ENTRIES - len(self.slow), 60)
            return
        raise AssertionError(f"the fast part: {len(self.fast)} entries asked for")

    async def served_at_least(self, count: int) -> None:
        """Wait until the site has been asked for ``count`` entries in all (a crawl under way, not a timer's guess)."""
        with contextlib.suppress(TimeoutError):
            await until(lambda: self.served >= count, 60)
            return
        raise AssertionError(f"the site was asked for {self.served} entries, never {count}")

    async def started(self, base: str) -> None:
        self.base = base
        paths = [f"/kotoba/{n}?yomi=1" for n in range(lopsided.ENTRIES)]
        owners = await parts_of([base + path for path in paths])
        self.slow = {path for path, owner in zip(paths, owners, strict=True) if owner == 1}


async def crawl(site: Site, tmp: Path, *extra: str, concurrency: int = 4) -> Child:
    """``eclaw crawl`` of the word list on two processes, forked from the fork server (a process of its
    own, its session's leader, whose two processes are its children: no Python to start, no eclaw to import)."""
    return await spawn(
        "crawl", SPIDER, "-a", f"base_url={site.base}", "--processes", "2",
        "-o", str(tmp / "words.jsonl"), "-s", "store=", "-s", f"concurrency={concurrency}",
        "--log-level", "WARNING", "-q", *extra,
        cwd=tmp, stdout=PIPE, stderr=PIPE, start_new_session=True,
    )  # fmt: skip


def items(tmp: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (tmp / "words.jsonl").read_text(encoding="utf-8").splitlines()]


async def test_the_process_out_of_work_crawls_part_of_the_others_queue(tmp_path: Path) -> None:
    site = Site()
    async with serve(site.app()) as base:
        await site.started(base)
        assert 120 < len(site.slow) < 240  # about half the entries are process 2's
        out = await finished(await crawl(site, tmp_path), "the crawl")
    found = items(tmp_path)
    assert sorted(item["n"] for item in found) == list(range(lopsided.ENTRIES)), out  # each once
    assert {item["title"] for item in found} >= {"言葉 第0号", f"言葉 第{lopsided.ENTRIES - 1}号"}
    parsers: dict[bool, set[object]] = defaultdict(set)
    slow = {int(path.split("/")[2].partition("?")[0]) for path in site.slow}
    for item in found:
        parsers[item["n"] in slow].add(item["pid"])
    assert len(parsers[False]) == 1  # process 1's own part: only it fetched those
    assert len(parsers[True]) == 2, out  # process 2's part: both fetched some, the first lent them
    lent = [item for item in found if item["n"] in slow and item["pid"] in parsers[False]]
    assert len(lent) >= 20, len(lent)
    said = re.search(r"requests lent to another process\s+(\d+)", out)
    assert said and int(said.group(1)) >= len(lent), out  # the summary says so (a retry of one counts once)


async def test_a_crawl_stopped_while_requests_are_lent_counts_them_as_pending(tmp_path: Path) -> None:
    """Ctrl-C without ``--state`` while the slow process lends its pages: what was crawled is written
    once, and the summary accounts for every request (those queued in either process, or sent to one and
    not read, are pending). Then one process killed alone: the command says so (exit 1), and what it had
    taken in is not counted pending again (how far it read died with it): no page is both written and
    pending."""
    site = Site()
    async with serve(site.app()) as base:
        await site.started(base)
        stopped = await crawl(site, tmp_path, concurrency=2)
        await site.lending()  # (the summary says so too, checked below)
        os.killpg(stopped.pid, signal.SIGINT)
        out = await finished(stopped, "the stopped crawl")
        lent = re.search(r"requests lent to another process\s+(\d+)", out)
        assert lent and int(lent.group(1)) > 0, out
        found = [item["n"] for item in items(tmp_path)]
        assert len(found) == len(set(found)) and accounted(out) + len(found) >= lopsided.ENTRIES, out
        site.fast.clear()
        killed = await crawl(site, tmp_path, concurrency=2)
        children = await forked(killed.pid, 2)
        await site.lending()
        os.kill(children[-1], signal.SIGKILL)
        answer, _ = await asyncio.wait_for(killed.communicate(), 60)
    pending, stored = counts(answer.decode())["pending"], len(items(tmp_path))
    assert killed.returncode == 1 and pending + stored <= lopsided.ENTRIES + 1, answer.decode()  # the index too


async def test_kills_while_requests_are_lent_lose_and_double_nothing(tmp_path: Path) -> None:
    """kill -9 of the whole crawl, then of one of its processes alone (the crawl stops the other), while
    the fast process is being lent the slow one's pages (checkpoints every tenth of a second, so some
    kills fall between a lend and the checkpoint that holds it; two downloads at once, so the slow part
    takes about 7 s with lending), and a Ctrl-C pause: each resume goes on from what was saved, and
    every entry's item is written once."""
    site, state, rng = Site(), tmp_path / "state", random.Random(11)
    async with serve(site.app()) as base:
        await site.started(base)
        for whole in (True, True, False, False):
            killed = await crawl(site, tmp_path, "--state", str(state), "-s", "checkpoint_interval=0.1", concurrency=2)
            await asyncio.sleep(rng.uniform(1.0, 2.0))
            if whole:
                await kill_group(killed)
                continue
            os.kill(rng.choice(await forked(killed.pid, 2)), signal.SIGKILL)
            _, err = await asyncio.wait_for(killed.communicate(), 60)
            said = err.decode().strip().splitlines()
            assert killed.returncode == 1 and said, err.decode()
            assert "of the crawl ended without finishing, the others stopped; run the same command" in said[-1]
        paused = await crawl(site, tmp_path, "--state", str(state), concurrency=2)
        await forked(paused.pid, 2)
        await site.served_at_least(site.served + 5)  # a crawl under way, not one starting
        os.killpg(paused.pid, signal.SIGINT)
        assert "crawl paused" in await finished(paused, "the paused crawl")
        await finished(await crawl(site, tmp_path, "--state", str(state)), "the resumed crawl")
    assert sorted(item["n"] for item in items(tmp_path)) == list(range(lopsided.ENTRIES))


def test_a_lent_line_is_read_once_its_lender_has_saved_it(tmp_path: Path) -> None:
    """The borrower reads the links before a lent line at once, and the lent line (and what follows)
    only once the lender says a checkpoint on disk holds it."""
    lender, borrower = Mesh(tmp_path, 0, 2), Mesh(tmp_path, 1, 2)
    lender.open()
    borrower.open()
    try:
        lender.send(1, [b"http://a.test/1\t\t0\t\n", LENT + b"http://a.test/2\t\t0\t\n", b"http://a.test/3\t\t0\t\n"])
        lines, position = borrower.arrivals()[0]
        assert lines == [b"http://a.test/1\t\t0\t"]
        borrower.taken(0, position)
        assert borrower.arrivals() == {}
        lender.commit(1, lender.sent(1))
        lines, position = borrower.arrivals()[0]
        assert lines == [LENT + b"http://a.test/2\t\t0\t", b"http://a.test/3\t\t0\t"]
        assert position == lender.sent(1)
    finally:
        lender.close()
        borrower.close()


async def test_what_is_lent_is_readable_once_a_checkpoint_on_disk_holds_it_as_lent(tmp_path: Path) -> None:
    """With ``--state`` the lender asks for a checkpoint, and its borrower may read what was lent only
    once that checkpoint (which no longer holds the requests as its own) is on disk."""
    spider, settings = lopsided.WordSpider(base_url="http://a.test"), Settings(concurrency=2)
    lender, borrower = PartFrontier(Mesh(tmp_path, 0, 2)), PartFrontier(Mesh(tmp_path, 1, 2))
    lent: list[Request] = []
    saves: list[int] = []

    async def nothing(requests: list[Request]) -> None:
        return None

    for frontier in (lender, borrower):
        await frontier.open(spider, settings, lambda: None)
    marked = {f"http://a.test/kotoba/{n}" for n in range(150, 200)}  # made their redirect's page seen

    def movable(request: Request) -> bool:
        return request.url not in marked

    lender.feed(Feed(nothing, nothing, lent.extend, movable, lambda: saves.append(1), lambda: False, keeps_state=True))
    try:
        urls = [f"http://a.test/kotoba/{n}" for n in range(200)]
        own = [Request(url) for url in urls if lender.owner(Request(url)) == 0]
        assert await lender.enqueue(own) == [None] * len(own)
        assert borrower.mesh.arrivals() == {}  # it reads every file: it may say it is idle
        borrower.mesh.say(idle=True)
        assert await lender.next_request() is not None  # the crawl has begun: the lender looks for idle ones
        await until(lambda: bool(lent))
        assert len(lent) >= len(own) // 5 and saves  # lent, and a checkpoint asked for
        assert not marked & {request.url for request in lent}  # those stay with the page they made seen
        assert lender.pending() == len(own) - 1 - len(lent)
        assert borrower.mesh.arrivals() == {}  # not in a checkpoint yet: not to be read
        lender.checkpoint()
        lender.checkpointed()
        lines, _ = borrower.mesh.arrivals()[0]
        assert [line.split(b"\t")[0] for line in lines] == [LENT + r.url.encode() for r in lent]
    finally:
        for frontier in (lender, borrower):
            await frontier.close()


async def test_a_process_given_work_while_its_idle_handlers_ran_is_not_idle(tmp_path: Path) -> None:
    """Links that came in while the crawl's ``EngineIdle`` handlers ran are queued: ``idle`` returns at
    once, so the process does not say it is idle (and the crawl end) with them still to fetch."""
    frontier = PartFrontier(Mesh(tmp_path, 0, 2))
    await frontier.open(lopsided.WordSpider(base_url="http://a.test"), Settings(), lambda: None)
    try:
        urls = [f"http://a.test/kotoba/{n}" for n in range(20)]
        own = [Request(url) for url in urls if frontier.owner(Request(url)) == 0]
        await frontier.enqueue(own)
        await asyncio.wait_for(frontier.idle(), 1.0)
    finally:
        await frontier.close()
