"""``eclaw serve`` forked from the fork server (tests/forkserver.py) instead of started as a new Python:
a service start then costs a fork, not the ~0.4 s of CPU that importing eclaw takes again. The process
is as real as before (its pid, its signals, its exit code, its log file, the crawls it starts); only the
interpreter it comes from is already warm.

The fork server's client side is asyncio, the service tests are plain functions: the children are
spawned and watched on one event loop in a daemon thread of their own."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from tests import forkserver
from tests.service.helpers import Service, wait_for

T = TypeVar("T")
_loop: list[asyncio.AbstractEventLoop] = []


def _run(coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    """Run ``coroutine`` on the fork server's client loop (started at its first use); its result."""
    if not _loop:
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, name="forked-service", daemon=True).start()
        _loop.append(loop)
    return asyncio.run_coroutine_threadsafe(coroutine, _loop[0]).result(timeout)


class ForkedProcess:
    """A forked child seen as the :class:`subprocess.Popen` a :class:`Service` holds."""

    def __init__(self, child: forkserver.Child) -> None:
        self.child = child
        self.pid = child.pid

    def poll(self) -> int | None:
        return self.child.returncode

    def send_signal(self, signum: int) -> None:
        self.child.send_signal(signum)

    def wait(self, timeout: float | None = None) -> int:
        return _run(asyncio.wait_for(self.child.wait(), timeout), (timeout or 60) + 5)


class ForkedService(Service):
    """A :class:`Service` whose ``eclaw serve`` is forked from the fork server. It is not among the
    children killed at the end of each test (a module's service outlives its tests): its fixture stops
    it, and the fork server kills what still runs when the test process ends."""

    def start(self) -> ForkedService:
        env = {k: v for k, v in os.environ.items() if k != "ECLAW_SERVE_TOKEN"}
        if self.token:
            env["ECLAW_SERVE_TOKEN"] = self.token
        args = ["serve", "--project", str(self.project), "--port", str(self.port), "--grace", "5", *self.extra]
        with (self.project / "service.log").open("ab") as log:
            child = _run(forkserver.spawn(*args, cwd=os.getcwd(), env=env, stdout=log, stderr=log))
        for server in forkserver._server:  # not a test's leftover: see the class
            server.children.discard(child)
        self.process = ForkedProcess(child)  # type: ignore[assignment]
        wait_for(self._up, 20, "the service")
        return self
