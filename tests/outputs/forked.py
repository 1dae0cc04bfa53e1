"""``eclaw ARGS`` as a real process, forked from the fork server (tests/forkserver.py: no new Python to
start, no eclaw to import again), for the output, media and service tests about a process: a SIGKILL,
an exit code, what it printed on stdout and stderr."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.forkserver import PIPE, Child, spawn

__all__ = ["PIPE", "Child", "eclaw_forked", "start_forked"]


async def start_forked(*args: str, cwd: str | Path, env: dict[str, str] | None = None) -> Child:
    """``python -m eclaw ARGS`` in ``cwd`` with ``env``, its stdout and stderr piped."""
    return await spawn(*args, cwd=cwd, env=env, stdout=PIPE, stderr=PIPE)


async def eclaw_forked(
    *args: str, cwd: str | Path, env: dict[str, str] | None = None, wait: float = 120
) -> tuple[int, str, str]:
    """``python -m eclaw ARGS`` run to its end: its exit code, stdout and stderr."""
    child = await start_forked(*args, cwd=cwd, env=env)
    try:
        out, err = await asyncio.wait_for(child.communicate(), wait)
    finally:
        child.close()
    return await child.wait(), out.decode(), err.decode()
