"""A real ``eclaw serve`` process on a free port, a local slow site in a thread, an API client that
validates every answer against the service's OpenAPI schema."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema

from eclaw.service.openapi import SCHEMA
from eclaw.testing import serve
from tests.sites import SlowSite

SPIDERS = '''
from eclaw import Spider


class Slow(Spider):
    name = "slow"
    secret_args = ("pin",)

    def parse(self, response):
        if "/slow/" in response.url:
            yield {"url": response.url}
        yield from response.follow_all(css="a")
'''
# a two-task flow: a spider crawling the local site (parameter ``base``), then a function
FLOW = '''
from eclaw import Spider
from eclaw.flows import Flow

flow = Flow("pages")


@flow.task(spider_args=lambda ctx: {"start_urls": [ctx.params["base"] + "/?count=3"]})
class Pages(Spider):
    name = "pages"

    def parse(self, response):
        if "/slow/" in response.url:
            yield {"url": response.url}
        yield from response.follow_all(css="a")


@flow.task(depends_on=["pages"])
def count(ctx):
    return {"pages": len(ctx["pages"])}
'''
_ACTIVE = ("queued", "running", "cancelling")
BROKEN = "import nothing_of_that_name\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@contextlib.contextmanager
def site(delay: float = 0.1) -> Iterator[str]:
    """A :class:`SlowSite` served from a thread; yields its base URL."""
    ready: list[str] = []
    stop = threading.Event()

    async def main() -> None:
        async with serve(SlowSite(delay=delay).app()) as base:
            ready.append(base)
            await asyncio.to_thread(stop.wait)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    wait_for(lambda: ready, 10, "the site")
    try:
        yield ready[0]
    finally:
        stop.set()
        thread.join(10)


class Service:
    """One ``eclaw serve`` process of ``project`` (start, kill -9, start again)."""

    def __init__(self, project: Path, *extra: str, token: str | None = None) -> None:
        self.project, self.extra, self.token = project, extra, token
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Service:
        env = {k: v for k, v in os.environ.items() if k != "ECLAW_SERVE_TOKEN"}
        if self.token:
            env["ECLAW_SERVE_TOKEN"] = self.token
        cmd = [sys.executable, "-m", "eclaw", "serve", "--project", str(self.project), "--port", str(self.port),
               "--grace", "5", *self.extra]  # fmt: skip
        with (self.project / "service.log").open("ab") as log:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=log, env=env)
        wait_for(self._up, 60, "the service")  # a busy machine: a fresh Python and its imports
        return self

    def _up(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"service exited: {(self.project / 'service.log').read_text()[-2000:]}")
        try:
            return self.call("GET", "/api/health")[0] == 200
        except OSError:
            return False

    def stop(self, signum: int = signal.SIGTERM) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signum)
            self.process.wait(20)

    def drain(self) -> None:
        """Cancel the jobs still queued or running and wait for their ends (no crawl outlives a test)."""
        active = [j for j in self.call("GET", "/api/jobs?limit=1000")[1]["jobs"] if j["state"] in _ACTIVE]
        for job in active:
            self.call("POST", f"/api/jobs/{job['id']}/cancel")
        for job in active:
            path = f"/api/jobs/{job['id']}"
            wait_for(lambda path=path: self.call("GET", path)[1]["state"] not in _ACTIVE, 30, "cancelled jobs")

    def call(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> tuple[int, Any]:
        """One API call; the answer is validated against the OpenAPI schema of ``method path``."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, method=method, data=data)
        if self.token and auth:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=10) as response:
                status, data = response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            with exc:
                status, data = exc.code, json.loads(exc.read())
        validate(method, path, status, data)
        return status, data


def validate(method: str, path: str, status: int, data: Any) -> None:
    """``data`` matches the OpenAPI schema of the answer ``status`` to ``method path``."""
    route = path.partition("?")[0]
    for template, ops in SCHEMA["paths"].items():
        parts, given = template.split("/"), route.split("/")
        if len(parts) == len(given) and all(p == g or p.startswith("{") for p, g in zip(parts, given, strict=True)):
            responses = ops[method.lower()]["responses"]
            assert str(status) in responses, f"{method} {path}: status {status} not in the schema"
            schema = responses[str(status)]["content"]["application/json"]["schema"]
            jsonschema.validate(data, {**schema, "components": SCHEMA["components"]})
            return
    raise AssertionError(f"{method} {path} is not in the schema")


def write_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "spiders.py").write_text(SPIDERS)
    (root / "broken.py").write_text(BROKEN)
    return root




@contextlib.contextmanager
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A real aiohttp webhook receiver in a thread; yields its URL and the JSON bodies it got."""
    from aiohttp import web

    got: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        got.append(await request.json())
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/{path:.*}", handle)
    ready: list[str] = []
    stop = threading.Event()

    async def main() -> None:
        async with serve(app) as base:
            ready.append(base)
            await asyncio.to_thread(stop.wait)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    wait_for(lambda: ready, 10, "the receiver")
    try:
        yield ready[0] + "/hook", got
    finally:
        stop.set()
        thread.join(10)
