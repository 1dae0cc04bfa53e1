"""The processes of one crawl, watched from the parent: it says when the crawl is over (every
process idle and every file between them read to its end, twice alike in a row), and passes
Ctrl-C on to them once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

from eclaw.frontier.mesh import mesh_files, read_status
from eclaw.processes.fork import SIGNALS
from eclaw.processes.part import PAUSED

__all__ = ["Group", "failed_process"]

_WATCH = 0.02  # seconds between two looks at the processes' status
_FAILED = "shutdown (process {} failed)"  # the crawl's finish reason when a process ended without its stats


def failed_process(reason: str) -> int | None:
    """The number (from 1) of the process whose failure stopped the crawl, if ``reason`` says one did."""
    head, _, tail = _FAILED.partition("{}")
    number = reason.removeprefix(head).removesuffix(tail)
    return int(number) if reason.startswith(head) and reason.endswith(tail) and number.isdigit() else None


class Group:
    """The processes ``pids`` of the crawl whose files are in ``mesh``."""

    def __init__(self, mesh: Path, pids: list[int]) -> None:
        self.mesh, self.count, self.pids = mesh, len(pids), pids
        self.codes: dict[int, int] = {}  # exit codes, by process, of those that ended
        self.reason = ""  # why the crawl stopped before its end ("" while it has not)
        self._last: tuple[Any, ...] | None = None

    async def watch(self) -> list[int]:
        """Say when the crawl is over (or stop it), and wait for the processes: their exit codes."""
        loop = asyncio.get_running_loop()
        for signum in SIGNALS:
            loop.add_signal_handler(signum, self.stop, f"shutdown ({signal.Signals(signum).name})")
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)  # one that came while they started is handled now
        try:
            ended = False
            while len(self.codes) < self.count:
                await asyncio.sleep(_WATCH)
                self._reap()
                if ended or self.reason:
                    continue
                early = self._left_early()
                if early is not None:
                    self.stop(early)  # one stopped (failed, or reached a budget): all stop
                elif self._all_idle():
                    (self.mesh / "end").write_text("")
                    ended = True
        finally:
            for signum in SIGNALS:
                loop.remove_signal_handler(signum)
        return [self.codes[k] for k in range(self.count)]

    def outcome(self, codes: list[int]) -> str:
        """Why the crawl ended, once every process has (``codes``, from :meth:`watch`): a process that died
        (it ended without its stats) first, even while the crawl was stopping or ending anyway, since that
        is what a script must hear; else the reason it was stopped, if it was."""
        for k, code in enumerate(codes):
            if code not in (0, PAUSED) and not (self.mesh / f"stats-{k}.json").exists():
                return _FAILED.format(k + 1)
        return self.reason or ("finished" if not any(codes) else "shutdown")

    def stop(self, reason: str) -> None:
        """Stop every process still running (each pauses, with ``--state``): Ctrl-C, or one stopped early."""
        if self.reason:
            return
        self.reason = reason
        for k, pid in enumerate(self.pids):
            if k not in self.codes:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGINT)

    def _reap(self) -> None:
        for k, pid in enumerate(self.pids):
            if k not in self.codes:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    self.codes[k] = os.waitstatus_to_exitcode(status)

    def _left_early(self) -> str | None:
        """Why a process ended before the crawl did (a budget of its own, or a failure), if one did; one
        whose part had finished in an earlier run (it ends at once when resumed) did not."""
        for k in self.codes:
            try:
                reason = str(json.loads((self.mesh / f"stats-{k}.json").read_text()).get("finish_reason"))
            except (FileNotFoundError, ValueError):
                return _FAILED.format(k + 1)
            if reason != "already finished":
                return reason
        return None

    def _all_idle(self) -> bool:
        """Every running process idle and every file read to its end, the same twice in a row."""
        running = set(range(self.count)) - self.codes.keys()
        statuses = {}
        for k in running:
            status = read_status(self.mesh, k)
            if status is None or not status.get("idle"):
                self._last = None
                return False
            statuses[k] = status
        sizes = []
        for a, b, path in mesh_files(self.mesh, self.count):
            if b not in running:
                continue  # a process done in an earlier run reads nothing more
            size = path.stat().st_size if path.exists() else 0
            if statuses[b]["read"].get(str(a), 0) != size:
                self._last = None
                return False
            sizes.append(size)
        now = (tuple(sizes), json.dumps(statuses, sort_keys=True))
        alike, self._last = now == self._last, now
        return alike
