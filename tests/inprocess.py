"""``eclaw ARGS`` run in this test process: the CLI's :func:`eclaw.cli.main.main`, with no child
Python to start (each costs ~0.4 s of CPU to import eclaw). For tests about what a command does, not
about its process (signals, a kill, peak memory): those keep a subprocess.

The command runs in a thread, with its own event loop (``asyncio.run``), so the sites it crawls can be
served by the test's loop meanwhile; its stdout and stderr are captured (its console logging too: the
handler it installs writes to the captured stderr); the root logger's handlers and level, which the
command replaces (``logging.basicConfig(force=True)``), are put back after it, for the tests that run
next in this process. One command at a time: stdout, stderr and the root logger are the process's.
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout

from eclaw.cli.main import main

__all__ = ["eclaw_inprocess", "kept_logging"]


@contextmanager
def kept_logging() -> Iterator[None]:
    """The root logger's handlers (pytest's own among them) taken off it for the block, so that a command's
    ``basicConfig(force=True)`` does not close them, and put back after it with the root's level and every
    logger's (a level a command set would silence the next tests' log lines); the handlers the block added
    are closed."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logger.level for name, logger in _loggers()}  # a command may set one (eclaw flow: eclaw.core)
    root.handlers.clear()
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, logger in _loggers():
            logger.setLevel(levels.get(name, logging.NOTSET))


def _loggers() -> list[tuple[str, logging.Logger]]:
    return [(n, g) for n, g in list(logging.Logger.manager.loggerDict.items()) if isinstance(g, logging.Logger)]


async def eclaw_inprocess(*args: str, wait: float = 120) -> tuple[int, str, str]:
    """``eclaw ARGS`` (in the current working directory): its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()

    def run() -> int:
        with redirect_stdout(out), redirect_stderr(err):
            return main(list(args))

    with kept_logging():
        code = await asyncio.wait_for(asyncio.to_thread(run), wait)
    return code, out.getvalue(), err.getvalue()
