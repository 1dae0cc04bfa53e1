"""The processes an ``eclaw crawl --processes N`` forked, for the tests that kill one of them as it crawls:
start: read from Linux's ``/proc/PID/task/TID/children`` (a few bytes per thread of the command). Reading
every process's stat file instead (tests/children.py) costs ~8 ms of CPU on a machine running ~230
processes, more on a busy CI one: a look every 5 ms made each wait a busy one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from tests import children
from tests.conftest import until
from tests.forkserver import Process

__all__ = ["children_of", "forked", "kill_group"]


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, sorted (none once it has ended). A kernel without the
    ``children`` files (no ``CONFIG_PROC_CHILDREN``) is asked the slow way."""
    task = Path(f"/proc/{pid}/task")
    if not (task / str(pid) / "children").exists():
        return sorted(children.children_of(pid)) if task.exists() else []
    found: list[int] = []
    for listing in task.glob("*/children"):
        try:
            found.extend(int(child) for child in listing.read_text().split())
        except (OSError, ValueError):  # the thread ended meanwhile
            continue
    return sorted(found)


async def forked(pid: int, count: int, every: float = 0.005) -> list[int]:
    """The ``count`` processes ``pid`` forks, once they are all up (a look every ``every`` s)."""
    deadline = asyncio.get_running_loop().time() + 60  # generous: a loaded machine forks late
    while asyncio.get_running_loop().time() < deadline:
        found = children_of(pid)
        if len(found) >= count:
            return found
        await asyncio.sleep(every)
    raise AssertionError(f"process {pid} never had {count} children")


async def kill_group(process: Process) -> None:
    """SIGKILL a crawl command, its processes and what each started, and return once all have ended: one
    still ending holds its part's state lock, and a crawl started at once on that state would find it in
    use. Each forked process leads a session of its own (:func:`eclaw.processes.fork.fork`), outside the
    command's group: it is killed and waited for by its own group."""
    groups = [process.pid, *children_of(process.pid)]
    for group in groups:
        with contextlib.suppress(ProcessLookupError):  # it ended on its own meanwhile (said below)
            os.killpg(group, signal.SIGKILL)
    code = await process.wait()
    if code not in (0, -signal.SIGKILL):  # what it said tells why
        said = (await process.stderr.read()).decode(errors="replace").strip() if process.stderr is not None else ""
        raise AssertionError(f"the crawl to be killed had ended by itself: exit {code}: {said[-2000:]}")
    await until(lambda: not children.group_running(*groups), 60, every=0.05)  # a look reads every /proc/PID
