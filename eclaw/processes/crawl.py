"""``eclaw crawl ... --processes N``: one crawl on N processes of this machine.

The crawl runs as a small Redis cluster of its own: a private ``redis-server`` on a
Unix socket (its data in the ``--state`` directory, append-only, so a pause or a
crash loses nothing; else in a temporary one) holds the frontier, the dupe filter,
per-host politeness and the items (each once); N ``eclaw worker`` processes crawl
it; when the frontier is empty the items go to the outputs, from this process.
Ctrl-C pauses every worker (what they held goes back to the queue); with
``--state`` the same command resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eclaw.cli.export import export_items_to
from eclaw.cluster.frontier import connect
from eclaw.cluster.seed import seed, seeded
from eclaw.cluster.sink import merged_stats
from eclaw.exceptions import ConfigError
from eclaw.settings import Settings
from eclaw.spider import Spider, make_spider
from eclaw.stats import Stats

__all__ = ["LocalRedis", "crawl_processes", "processes_wanted", "sweep_stale_sockets"]

logger = logging.getLogger(__name__)
FINISHED = "finished"  # a marker file in the state directory
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child, before it runs: the kernel kills it when this process dies (even by kill -9),
    so no worker crawls on, and no redis-server stays, behind a crawl that is gone (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def processes_wanted(value: str) -> int:
    """``--processes N`` or ``auto`` (every core); a one-line error otherwise."""
    if value == "auto":
        return os.cpu_count() or 1
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"--processes expects a number of processes or 'auto', got {value!r}")
    return int(value)


def sweep_stale_sockets(parent: Path, *, older_than: float = 60.0) -> int:
    """Remove the socket folders that crawls killed by SIGKILL left in ``parent`` (their redis-server
    died with them; nothing listens on the socket, or there is none); returns how many went."""
    removed = 0
    now = time.time()
    for folder in parent.glob("eclaw-redis-*"):
        try:
            found = folder.stat()
        except OSError:
            continue
        if not folder.is_dir() or found.st_uid != os.getuid() or now - found.st_mtime < older_than:
            continue  # another user's, or a crawl starting now
        path = folder / "redis.sock"
        if path.exists():
            probe = socket.socket(socket.AF_UNIX)
            try:
                probe.connect(str(path))
                continue  # a live crawl's
            except OSError:
                pass  # refused: its server is gone
            finally:
                probe.close()
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
    return removed


class LocalRedis:
    """A private redis-server for one crawl: a Unix socket in a short temporary folder, its data in
    ``directory`` (append-only and fsynced when ``persist``: a crawl saved with ``--state``)."""

    def __init__(self, directory: Path, *, persist: bool) -> None:
        self.directory = directory
        self.persist = persist
        sweep_stale_sockets(Path(tempfile.gettempdir()))
        self._socket_dir = Path(tempfile.mkdtemp(prefix="eclaw-redis-"))
        self.socket = self._socket_dir / "redis.sock"
        self._process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    async def start(self) -> None:
        binary = shutil.which("redis-server", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/usr/bin")
        if not binary:
            raise ConfigError("--processes needs redis-server (apt-get install redis-server) and eclaw[redis]")
        self.directory.mkdir(parents=True, exist_ok=True)
        durable = ["--appendonly", "yes", "--appendfsync", "always"] if self.persist else ["--appendonly", "no"]
        self._process = await asyncio.create_subprocess_exec(
            binary, "--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700",
            "--dir", str(self.directory), "--save", "", *durable,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True, preexec_fn=die_with_parent,
        )  # fmt: skip
        for _ in range(250):
            if os.path.exists(self.socket):  # noqa: ASYNC240 - a stat while waiting for the server
                with contextlib.suppress(ConfigError):
                    client = await connect(self.url)
                    await client.aclose()
                    return
            await asyncio.sleep(0.02)
        await self.stop()
        raise ConfigError(f"the crawl's redis-server did not start (data in {self.directory})")

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()  # SIGTERM: redis-server flushes its append-only file and exits
            await self._process.wait()
        shutil.rmtree(self._socket_dir, ignore_errors=True)


async def crawl_processes(
    spec: str,
    spider_cls: type[Spider],
    spider_args: dict[str, str],
    *,
    processes: int,
    settings: Settings,
    overrides: dict[str, Any],
    outputs: list[str],
    state: str,
) -> Stats:
    """Run the crawl on ``processes`` workers; the merged stats (``finish_reason`` as one process would say)."""
    directory = Path(state) if state else Path(tempfile.mkdtemp(prefix="eclaw-crawl-"))
    if state and (directory / FINISHED).exists():
        return Stats(spider=spider_cls.name, finish_reason="already finished")
    redis = LocalRedis(directory / "redis", persist=bool(state))
    group = _Group()
    with group.signals():
        try:
            await redis.start()
            worker_overrides = {k: v for k, v in overrides.items() if k != "state_dir"} | {"store": ""}
            effective = settings.replace(worker_overrides | {"scheduler_url": redis.url})
            instance = make_spider(spider_cls, spider_args)
            if not await seeded(redis.url, instance.name):
                await seed(instance, effective)
            codes = await group.run(spec, spider_args, worker_overrides, redis.url, processes)
            stats = await _merged(redis.url, instance.name)
            if any(codes):
                stats.finish_reason = "shutdown (paused)" if state else "shutdown"
                return stats
            stats.finish_reason = "finished"
            await export_items_to(outputs, redis.url, instance, effective, stats)
            if state:
                (directory / FINISHED).write_text(json.dumps(stats.as_dict(), default=str))
            return stats
        finally:
            await redis.stop()
            if not state:
                shutil.rmtree(directory, ignore_errors=True)


class _Group:
    """The worker processes of one crawl. Ctrl-C (or SIGTERM) from the moment the crawl starts pauses
    them all, once, from here; one that comes before they start means none start."""

    def __init__(self) -> None:
        self.workers: list[asyncio.subprocess.Process] = []
        self.stopping: int | None = None

    def stop(self, signum: int) -> None:
        self.stopping = signum
        for worker in self.workers:
            with contextlib.suppress(ProcessLookupError):
                worker.send_signal(signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    @contextlib.contextmanager
    def signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, self.stop, signum)
        try:
            yield
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(signum)

    async def run(self, spec: str, args: dict[str, str], overrides: dict[str, Any], url: str, count: int) -> list[int]:
        """Start ``count`` ``eclaw worker`` processes and wait for them: their exit codes."""
        command = [sys.executable, "-m", "eclaw", "worker", spec, "--redis", url]
        command += [f"-a{k}={v}" for k, v in args.items()] + [f"-s{k}={v}" for k, v in overrides.items()]
        for n in range(count):
            if self.stopping is not None:
                break
            worker = await asyncio.create_subprocess_exec(  # a session of its own: signals come once, from here
                *command, "--name", f"process-{n + 1}", stdout=asyncio.subprocess.DEVNULL,
                start_new_session=True, preexec_fn=die_with_parent,
            )  # fmt: skip
            self.workers.append(worker)
        if self.stopping is not None:
            self.stop(self.stopping)  # a signal while they were starting reaches the late ones too
        codes = [await worker.wait() for worker in self.workers]
        return codes if self.stopping is None else [*codes, 1]


async def _merged(url: str, spider: str) -> Stats:
    client = await connect(url)
    try:
        return await merged_stats(client, f"eclaw:{spider}:")
    finally:
        await client.aclose()
