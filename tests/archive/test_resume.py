"""Exactly-once for web archives: a CLI crawl writing ``crawl.warc.gz`` with ``--state``, killed
with SIGKILL twice, paused with SIGINT, then resumed to its end, archives each page's response
once, with no torn record, and its CDXJ index names each record once."""

from __future__ import annotations

import asyncio
import collections
import json
import signal
from collections.abc import Callable
from pathlib import Path

from eclaw.testing import serve
from tests.archive.helpers import read_archive
from tests.archive.running import crawl_here, start_forked
from tests.state.site import PAGES, make_app

SPIDER = str(Path(__file__).parents[1] / "state" / "site.py") + ":StateSpider"


def options(base: str, tmp: Path) -> list[str]:
    return ["-a", f"base_url={base}", "--state", str(tmp / "state"), "-o", "crawl.warc.gz",
            "-s", "checkpoint_interval=0.2"]  # fmt: skip


async def wait_for(condition: Callable[[], bool]) -> None:
    for _ in range(3000):  # a minute at most
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


def size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


async def test_sigkill_twice_a_pause_then_resume_archives_each_page_once(tmp_path: Path) -> None:
    archive = tmp_path / "crawl.warc.gz"
    async with serve(make_app()) as base:
        for threshold in (60_000, 200_000):  # about a tenth, then a third of the pages
            process = await start_forked(*options(base, tmp_path), cwd=tmp_path, spider=SPIDER)
            await wait_for(lambda threshold=threshold: size(archive) >= threshold)  # type: ignore[misc]
            process.kill()  # SIGKILL: no clean-up of any kind
            await process.wait()
        assert not (tmp_path / "crawl.cdxj").exists()  # written at the end only
        process = await start_forked(*options(base, tmp_path), cwd=tmp_path, spider=SPIDER)
        await wait_for(lambda: size(archive) >= 350_000)
        process.send_signal(signal.SIGINT)  # a pause: the archive is closed, its index written
        stdout, _ = await process.communicate()
        assert process.returncode == 0 and "crawl paused" in stdout.decode()
        assert (tmp_path / "crawl.cdxj").exists()
        await crawl_here(*options(base, tmp_path), cwd=tmp_path, spider=SPIDER)

    records = read_archive(archive)  # reads to the end: no torn record
    assert records[0].kind == "warcinfo" and sum(r.kind == "warcinfo" for r in records) == 1
    responses = collections.Counter(r.path for r in records if r.kind == "response")
    requests = collections.Counter(r.path for r in records if r.kind == "request")
    assert set(responses) == {f"/p/{n}" for n in range(PAGES)}  # the 404s too
    assert max(responses.values()) == 1, [p for p, n in responses.items() if n > 1][:5]
    assert requests == responses
    lines = (tmp_path / "crawl.cdxj").read_text().splitlines()
    offsets = [int(json.loads(line.split(" ", 2)[2])["offset"]) for line in lines]
    assert sorted(offsets) == sorted(r.offset for r in records if r.kind == "response")
    assert not (tmp_path / "crawl.cdxj.part").exists()
