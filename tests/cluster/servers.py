"""A real redis-server on a free loopback port, and a site that counts concurrent requests."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiohttp import web
from redis import Redis
from redis.exceptions import RedisError


def redis_binary() -> str:
    binary = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else ""
    )
    if not binary:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is missing: .ci/run installs it (apt-get install redis-server)")
        pytest.skip("redis-server not installed (apt-get install redis-server)")
    return binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """redis-server with its data in ``directory`` (append-only file on, so a restart keeps the crawl)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self.started = False  # once started, a restart keeps the port

    def start(self) -> None:
        """Start redis-server and wait until it answers. The port was free when picked, but a test
        running beside this one may pick it too: if another redis-server answers there, a first start
        picks another port (a restart keeps its port: its workers know it by its URL)."""
        for _ in range(1 if self.started else 20):
            self._launch()
            if self._answering_is_ours():
                self.started = True
                return
            self.stop()
            if self.started:
                break
            self.port = free_port()
            self.url = f"redis://127.0.0.1:{self.port}/0"
        raise RuntimeError(f"redis-server did not start on port {self.port} (another one answers there)")

    def _launch(self) -> None:
        self.process = subprocess.Popen(
            [
                redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def _answering_is_ours(self) -> bool:
        """Wait until a redis-server answers on the port; whether it is the one this object started."""
        assert self.process is not None
        client = Redis(host="127.0.0.1", port=self.port, socket_timeout=5)
        deadline = time.monotonic() + 30  # generous: a loaded machine starts it late; it only bounds a failure
        try:
            while time.monotonic() < deadline:
                try:
                    return int(client.info("server")["process_id"]) == self.process.pid
                except (RedisError, OSError):
                    if self.process.poll() is not None:  # ours exited: the port is taken
                        return False
                    time.sleep(0.02)
        finally:
            client.close()
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@contextmanager
def redis_server(directory: Path) -> Iterator[RedisServer]:
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class CountingSite:
    """Pages 0..pages-1 (each links to the next three), each taking ``delay`` seconds; records the
    most requests it ever had in flight at once."""

    def __init__(self, pages: int = 120, delay: float = 0.05) -> None:
        self.pages, self.delay = pages, delay
        self.in_flight = self.peak = self.hits = 0

    async def delayed(self) -> None:
        """Wait ``delay`` seconds for one request, counted in flight meanwhile."""
        self.in_flight += 1
        self.hits += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1

    def app(self) -> web.Application:
        async def page(request: web.Request) -> web.Response:
            n = int(request.match_info["n"])
            await self.delayed()
            links = "".join(f'<a href="/p/{m}">{m}</a>' for m in range(n + 1, min(n + 4, self.pages)))
            return web.Response(text=f"<html><h1>{n}</h1>{links}</html>", content_type="text/html")

        app = web.Application()
        app.router.add_get("/p/{n}", page)
        return app


SPIDER = """
from eclaw import Spider

class Pages(Spider):
    name = "pages"
    start_urls = []

    def __init__(self, base_url="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [base_url + "/p/0"]

    def parse(self, response):
        yield {"page": int(response.css("h1::text").get())}
        yield from response.follow_all(css="a")
"""
