"""A crawl killed (SIGKILL) while a file is being written: no orphan, no partial file, no duplicate;
the next run finishes the job and keeps what the first stored."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web

from eclaw.testing import serve

MB = 1024 * 1024


def _app(release: asyncio.Event) -> web.Application:
    app = web.Application()

    async def done(request: web.Request) -> web.Response:
        return web.Response(body=b"finished " * 1000, content_type="application/octet-stream")

    async def slow(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = 2 * MB
        await response.prepare(request)
        await response.write(b"a" * MB)
        await release.wait()  # the first run is killed here, half of the file written
        await response.write(b"b" * MB)
        return response

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<html></html>", content_type="text/html")

    app.router.add_get("/done.bin", done)
    app.router.add_get("/slow.bin", slow)
    app.router.add_get("/page", page)
    return app


async def _wait_for(condition: object, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


def _partial(tmp: Path) -> bool:
    return tmp.is_dir() and any(part.stat().st_size >= MB for part in tmp.iterdir())


@pytest.mark.parametrize("state", [False, True], ids=["rerun", "resume-from-state"])
async def test_sigkill_mid_file_then_resume(tmp_path: Path, state: bool) -> None:
    release = asyncio.Event()
    child = Path(__file__).with_name("resume_child.py")
    env = {**os.environ, "RESUME_STATE_DIR": str(tmp_path / "state") if state else ""}
    async with serve(_app(release)) as base:
        args = [sys.executable, str(child), str(tmp_path), f"{base}/page", f"{base}/done.bin", f"{base}/slow.bin"]
        first = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.DEVNULL, env=env)
        await _wait_for(lambda: _partial(tmp_path / "tmp") and len(list((tmp_path / "full").rglob("*.bin"))) == 1)
        os.kill(first.pid, signal.SIGKILL)
        await first.wait()
        assert [p.name for p in (tmp_path / "full").rglob("*.*")] == [hashlib.sha256(b"finished " * 1000).hexdigest()
                                                                       + ".bin"]  # fmt: skip
        release.set()
        second = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE, env=env)
        out, _ = await asyncio.wait_for(second.communicate(), timeout=60)
    assert second.returncode == 0
    (item,) = json.loads(out)
    done, slow = item["files"]
    assert done["status"] == "uptodate" and slow["status"] == "downloaded"
    assert slow["checksum"] == hashlib.sha256(b"a" * MB + b"b" * MB).hexdigest()
    assert not list((tmp_path / "tmp").iterdir())  # the killed run's temp file removed, the new one renamed
    stored = sorted(p for p in (tmp_path / "full").rglob("*") if p.is_file())
    assert len(stored) == 2
    for path in stored:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == path.stem  # whole files only
