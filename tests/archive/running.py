"""``eclaw crawl`` on the archive test site without a new Python: run in this test process
(:mod:`tests.inprocess`), for the tests about what a crawl archives; forked from the fork server
(:mod:`tests.forkserver`), for those about its process (killed, paused)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from tests.archive.helpers import ROOT, SPIDER
from tests.forkserver import PIPE, Child, spawn
from tests.inprocess import eclaw_inprocess


async def crawl_here(*args: str, cwd: Path, spider: str = SPIDER) -> str:
    """``eclaw crawl`` with ``args`` in the folder ``cwd``, as :func:`tests.archive.helpers.crawl` runs
    it in a child process: its output (it must succeed)."""
    with contextlib.chdir(cwd):
        code, out, err = await eclaw_inprocess("crawl", spider, "-s", "store=", "--log-level", "WARNING", *args)
    assert code == 0, err[-3000:]
    return out + err


async def start_forked(*args: str, cwd: Path, spider: str = SPIDER) -> Child:
    """``eclaw crawl`` with ``args`` in a process of its own, as :func:`tests.archive.helpers.start`
    starts it, forked from the fork server: its stdout and stderr piped."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return await spawn(
        "crawl", spider, "-s", "store=", "--log-level", "WARNING", *args, cwd=cwd, env=env, stdout=PIPE, stderr=PIPE
    )
