"""Exactly once through kill -9 where lending meets retries (``--processes 2 --state``): a request lent
to the process out of work that answers 503 there goes back to its owner as a retry, which its owner's
dupe filter does not stop (``dont_filter``). Its owner may read it only once the sender's checkpoint on
disk holds it as sent: read at once, the owner fetched and saved it while the sender, killed, resumed
from a checkpoint that still held it as its own to fetch, and the entry's item was written twice.

Also: a checkpoint that falls while a process takes in the others' lines holds as read exactly the
lines it holds as taken in (a lent line read again after a resume would be queued twice)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from eclaw import Request, Settings
from eclaw.frontier.base import Feed
from eclaw.frontier.mesh import HELD, LENT, Mesh
from eclaw.frontier.partition import PartFrontier
from eclaw.testing import serve
from tests.conftest import until
from tests.state import lopsided
from tests.state.forks import kill_group
from tests.state.test_lending import items
from tests.state.test_processes import finished

ROOT = Path(__file__).resolve().parents[2]
SPIDER = str(ROOT / "tests/state/lopsided.py") + ":WordSpider"
ENTRIES = 160
SLOW = 0.1  # seconds a page of process 2's part takes
Taker = Callable[[list[Request]], Awaitable[None]]


class RetrySite:
    """An index and ``ENTRIES`` entries (the shapes of :mod:`tests.state.lopsided`); process 2's part is
    slow, so process 1 is lent some of it, and each of its entries answers 503 the first time."""

    def __init__(self) -> None:
        self.slow: set[int] = set()
        self.asked: Counter[int] = Counter()
        self.served = 0  # entries answered 200, every run together

    def app(self) -> web.Application:
        async def index(request: web.Request) -> web.Response:
            links = "".join(f'<li><a href="/kotoba/{n}?yomi=1">{n}</a></li>' for n in range(ENTRIES))
            return _page("索引", f"<ul>{links}</ul>")

        async def entry(request: web.Request) -> web.Response:
            n = int(request.match_info["n"])
            self.asked[n] += 1
            if n in self.slow:
                await asyncio.sleep(SLOW)
                if self.asked[n] == 1:
                    return web.Response(status=503, text="busy")
            self.served += 1
            return _page(f"言葉 第{n}号", f"<h1>{n}</h1><p>{'花' * (20 + n)}</p>")

        app = web.Application()
        app.router.add_get("/", index)
        app.router.add_get("/kotoba/{n}", entry)
        return app

    async def started(self, base: str) -> None:
        frontier = PartFrontier(Mesh(Path(tempfile.mkdtemp()), 0, 2))
        await frontier.open(lopsided.WordSpider(), Settings(), lambda: None)
        try:
            self.slow = {n for n in range(ENTRIES) if frontier.owner(Request(f"{base}/kotoba/{n}?yomi=1")) == 1}
        finally:
            await frontier.close()

    def retried(self) -> int:
        """Entries answered after a 503: retries served."""
        return sum(1 for n, times in self.asked.items() if n in self.slow and times > 1)


def _page(title: str, body: str) -> web.Response:
    html = f"<html><head><title>{title}</title></head><body>{body}</body></html>"
    return web.Response(body=html.encode("shift_jis"), content_type="text/html", charset="shift_jis")


async def crawl(base: str, tmp: Path, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eclaw", "crawl", SPIDER, "-a", f"base_url={base}", "--processes", "2",
        "-o", str(tmp / "words.jsonl"), "-s", "store=", "-s", "concurrency=2",
        "--state", str(tmp / "state"), "--log-level", "WARNING", "-q", *extra,
        cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


async def test_a_retry_sent_back_to_its_owner_is_stored_once_through_kill_9(tmp_path: Path) -> None:
    """No checkpoint on a timer (an hour apart): the borrower's saved state is only what it saves for
    the retries it sends back, the owner's what it saves as it lends. kill -9 of the whole crawl once
    retries have been served and the owner has gone on lending (so saved them), then a resume: each
    entry's item is written once."""
    site = RetrySite()
    async with serve(site.app()) as base:
        await site.started(base)
        assert len(site.slow) > 50
        killed = await crawl(base, tmp_path, "-s", "checkpoint_interval=3600")
        try:
            with contextlib.suppress(TimeoutError):
                await until(lambda: site.retried() >= 4, 60)
            retried, served = site.retried(), site.served
            assert retried >= 4, f"{retried} retries served"
            with contextlib.suppress(TimeoutError):  # the crawl goes on: more lent, the owner saves
                await until(lambda: site.served >= min(served + 20, ENTRIES - 5), 60)
        finally:
            await kill_group(killed)
        await finished(await crawl(base, tmp_path), "the resumed crawl", 120)
    stored = Counter(int(str(item["n"])) for item in items(tmp_path))
    assert sorted(stored) == list(range(ENTRIES)) and max(stored.values()) == 1, {
        n: times for n, times in stored.items() if times > 1
    }


async def nothing(requests: list[Request]) -> None:
    return None


def feed(
    admit: Taker = nothing, adopt: Taker = nothing, save_soon: Callable[[], None] = lambda: None, *, state: bool
) -> Feed:
    """A crawl's side of a frontier with nothing behind it but ``admit``, ``adopt`` and ``save_soon``."""
    return Feed(admit, adopt, lambda requests: None, lambda request: True, save_soon, lambda: False, keeps_state=state)


async def test_a_request_its_owner_would_not_filter_waits_for_its_senders_checkpoint(tmp_path: Path) -> None:
    """A ``dont_filter`` request for another process's part is written held: the owner reads the links
    before it at once, it once the sender's checkpoint on disk holds it (a checkpoint is asked for)."""
    spider, saves = lopsided.WordSpider(base_url="http://a.test"), []
    sender, owner = PartFrontier(Mesh(tmp_path, 0, 2)), PartFrontier(Mesh(tmp_path, 1, 2))
    for frontier in (sender, owner):
        await frontier.open(spider, Settings(), lambda: None)
    sender.feed(feed(save_soon=lambda: saves.append(1), state=True))
    try:
        urls = [f"http://a.test/kotoba/{n}" for n in range(40)]
        theirs = [url for url in urls if sender.owner(Request(url)) == 1][:2]
        await sender.enqueue([Request(theirs[0]), Request(theirs[1], dont_filter=True)])
        lines, position = owner.mesh.arrivals()[0]
        assert [line.split(b"\t")[0] for line in lines] == [theirs[0].encode()] and saves
        owner.mesh.taken(0, position)
        assert owner.mesh.arrivals() == {}  # not in a checkpoint on disk yet
        sender.checkpoint()
        sender.checkpointed()
        lines, _ = owner.mesh.arrivals()[0]
        assert len(lines) == 1 and lines[0].startswith(HELD + b"{") and theirs[1].encode() in lines[0]
    finally:
        for frontier in (sender, owner):
            await frontier.close()


async def test_what_the_idle_handlers_send_held_is_readable_once_the_crawl_is_idle(tmp_path: Path) -> None:
    """A crawl takes no checkpoint while it is idle: a request held as its idle handlers ran (after its
    last checkpoint) is readable as it goes idle, or its owner would wait for it for ever."""
    spider = lopsided.WordSpider(base_url="http://a.test")
    sender, owner = PartFrontier(Mesh(tmp_path, 0, 2)), PartFrontier(Mesh(tmp_path, 1, 2))
    for frontier in (sender, owner):
        await frontier.open(spider, Settings(), lambda: None)
    sender.feed(feed(state=True))
    idle = None
    try:
        sender.checkpoint()  # the crawl's last checkpoint, then its idle handlers send a request on
        theirs = next(url for n in range(40) if sender.owner(Request(url := f"http://a.test/kotoba/{n}")) == 1)
        await sender.enqueue([Request(theirs, dont_filter=True)])
        assert owner.mesh.arrivals() == {}
        idle = asyncio.ensure_future(sender.idle())
        await until(lambda: bool(owner.mesh.arrivals()))
        lines, _ = owner.mesh.arrivals()[0]
        assert len(lines) == 1 and lines[0].startswith(HELD) and not idle.done()
    finally:
        if idle is not None:
            idle.cancel()
            await asyncio.gather(idle, return_exceptions=True)
        for frontier in (sender, owner):
            await frontier.close()


async def test_a_checkpoint_while_lines_are_taken_in_holds_as_read_what_it_holds_as_taken(tmp_path: Path) -> None:
    """The crawl's ``admit`` and ``adopt`` record their requests before they first suspend, and a
    checkpoint may fall at any suspension after: at each call, the read position already covers the
    run of lines it records (and no more), in the file's order."""
    spider = lopsided.WordSpider(base_url="http://a.test")
    writer, reader = Mesh(tmp_path, 0, 2), PartFrontier(Mesh(tmp_path, 1, 2))
    writer.open()
    await reader.open(spider, Settings(), lambda: None)
    seen: list[tuple[str, int, int]] = []  # (call, requests, read position at the call)

    def recorder(call: str) -> Taker:
        async def record(requests: list[Request]) -> None:
            seen.append((call, len(requests), reader.checkpoint()["read"][0]))
            await asyncio.sleep(0)  # where a checkpoint could fall

        return record

    reader.feed(feed(recorder("admit"), recorder("adopt"), state=False))
    try:
        line = b"http://a.test/kotoba/%d\tparse_entry\t1\t\n"
        runs = [[line % 1, line % 2], [LENT + line % 3], [line % 4], [LENT + line % 5, LENT + line % 6]]
        for run in runs:
            writer.send(1, run)
        writer.commit(1, writer.sent(1))
        assert await reader.next_request() is None  # the crawl has begun: the reader polls
        await until(lambda: len(seen) == len(runs))
        ends = [sum(len(b"".join(run)) for run in runs[: k + 1]) for k in range(len(runs))]
        calls = ["adopt" if run[0].startswith(LENT) else "admit" for run in runs]
        assert seen == [(call, len(run), end) for call, run, end in zip(calls, runs, ends, strict=True)]
    finally:
        await reader.close()
        writer.close()
