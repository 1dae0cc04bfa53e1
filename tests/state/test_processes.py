"""One crawl on two processes (``--processes 2``, a private redis-server): every page's item once in
every output, a pause (SIGINT) and a kill -9 of the whole crawl resumed with nothing lost or doubled,
and bad input one line."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from eclaw.testing import serve
from tests.cluster.servers import redis_binary
from tests.state.site import expected, make_app

ROOT = Path(__file__).resolve().parents[2]
SPIDER = str(ROOT / "tests/state/site.py") + ":StateSpider"


async def crawl(base: str, tmp: Path, *extra: str) -> asyncio.subprocess.Process:
    redis_binary()  # a clear failure (or skip outside CI) when redis-server is missing
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eclaw", "crawl", SPIDER, "-a", f"base_url={base}", "--processes", "2",
        "-o", str(tmp / "items.jsonl"), "-o", str(tmp / "items.csv"), "-s", "store=", "-s", "lease_timeout=1",
        "--log-level", "WARNING", "-q", *extra,
        cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


async def finished(process: asyncio.subprocess.Process, what: str, seconds: float = 180) -> str:
    """The crawl's stdout once it exits; on a timeout, what it said on stderr (and it is killed)."""
    try:
        out, err = await asyncio.wait_for(process.communicate(), seconds)
    except TimeoutError:
        os.killpg(process.pid, signal.SIGKILL)
        _, err = await process.communicate()
        raise AssertionError(f"{what}: still running after {seconds} s; stderr: {err.decode()[-3000:]}") from None
    assert process.returncode == 0, f"{what}: exit {process.returncode}: {err.decode()[-3000:]}"
    return out.decode()


def pages_in(tmp: Path) -> tuple[list[int], list[int]]:
    jsonl = [json.loads(line)["page"] for line in (tmp / "items.jsonl").read_text().splitlines()]
    with (tmp / "items.csv").open(newline="") as handle:
        rows = [int(row["page"]) for row in csv.DictReader(handle)]
    return sorted(jsonl), sorted(rows)


async def test_two_processes_crawl_every_page_once_into_every_output(tmp_path: Path) -> None:
    parsed, _ = expected()
    async with serve(make_app(delay=0.0)) as base:
        out = await finished(await crawl(base, tmp_path), "the crawl")
    assert pages_in(tmp_path) == (sorted(parsed), sorted(parsed))
    assert "written to" in out and re.search(r"finish reason\s+finished", out)


async def started(process: asyncio.subprocess.Process, state: Path) -> None:
    """Wait until the workers are crawling (the private Redis has written some of the crawl)."""
    for _ in range(600):
        if (state / "redis" / "appendonlydir").exists() or (state / "redis" / "appendonly.aof").exists():
            await asyncio.sleep(1.0)
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the crawl never started")


async def test_a_pause_and_a_kill_of_the_whole_crawl_resume_with_each_item_once(tmp_path: Path) -> None:
    parsed, _ = expected()
    state = tmp_path / "state"
    async with serve(make_app(delay=0.05)) as base:
        paused = await crawl(base, tmp_path, "--state", str(state))
        await started(paused, state)
        os.killpg(paused.pid, signal.SIGINT)  # Ctrl-C in the terminal reaches the whole group
        assert "crawl paused" in await finished(paused, "the paused crawl")
        killed = await crawl(base, tmp_path, "--state", str(state))
        await started(killed, state)
        os.killpg(killed.pid, signal.SIGKILL)  # the parent, its workers and its redis-server, at once
        await killed.wait()
        await finished(await crawl(base, tmp_path, "--state", str(state)), "the resumed crawl")
    assert pages_in(tmp_path) == (sorted(parsed), sorted(parsed))


async def test_bad_process_counts_are_one_line(tmp_path: Path) -> None:
    for extra in (["--processes", "0"], ["--processes", "2", "--redis", "redis://127.0.0.1:9/0"]):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "eclaw", "crawl", SPIDER, *extra, cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        _, err = await process.communicate()
        assert process.returncode == 2 and len(err.decode().strip().splitlines()) == 1, err.decode()


def test_socket_folders_left_by_killed_crawls_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    """A crawl killed with SIGKILL takes its redis-server with it but leaves its socket folder in
    /tmp; the next --processes crawl removes such folders: never a live one, nor one just made."""
    import socket
    import time

    from eclaw.cli.processes import sweep_stale_sockets

    def folder(name: str, *, listening: bool | None, age: float) -> tuple[Path, socket.socket | None]:
        path = tmp_path / f"eclaw-redis-{name}"
        path.mkdir()
        server = None
        if listening is not None:  # a socket file: a server listening on it, or one that died
            server = socket.socket(socket.AF_UNIX)
            server.bind(str(path / "redis.sock"))
            if listening:
                server.listen()
            else:
                server.close()
        os.utime(path, (time.time() - age, time.time() - age))
        return path, server

    killed, _ = folder("killed", listening=False, age=600)
    empty, _ = folder("empty", listening=None, age=600)
    live, server = folder("live", listening=True, age=600)
    starting, _ = folder("starting", listening=None, age=1)
    (tmp_path / "eclaw-redis-file").write_text("not a folder")
    try:
        assert sweep_stale_sockets(tmp_path) == 2
        assert not killed.exists() and not empty.exists()
        assert live.exists() and starting.exists() and (tmp_path / "eclaw-redis-file").exists()
    finally:
        assert server is not None
        server.close()
