"""CPU seconds per fetcher, for the escalation ladder's stats and report.

Fetches of different fetchers run at the same time in one process, so their CPU
cannot be timed one by one. Every second :class:`CpuShares` takes the CPU this
process used (``time.process_time``) and shares it out by how many downloads of
each fetcher were under way (integrated over the second); the CPU of the
process's descendants — the browser's driver and Chromium — goes to the fetchers
that start programs (``spawning``), shared the same way. An estimate, but one that
adds up: the shares sum to what the process and its children used.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

__all__ = ["CpuShares", "descendants_cpu"]

logger = logging.getLogger(__name__)

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def descendants_cpu(pid: int | None = None) -> float:
    """CPU seconds (user + system) of the running descendants of ``pid`` (this process), from /proc;
    0.0 where there is no /proc."""
    root = os.getpid() if pid is None else pid
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
            child = int(stat.parent.name)
            # user and system time, its own and its reaped children's (a renderer that exited)
            parents[child], times[child] = int(fields[1]), sum(int(f) for f in fields[11:15])
        except (OSError, ValueError, IndexError):
            continue  # a process that ended while we looked
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    total, todo = 0, list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        total += times[pid]
        todo.extend(children.get(pid, ()))
    return total / _TICKS


class CpuShares:
    """The CPU of this process (and of its children) shared out among fetchers by their busy time.

    Args:
        spawning: the fetchers whose work runs in child processes (``browser``): they alone
            share the children's CPU.
        clock: monotonic seconds.
        cpu: this process's CPU seconds so far.
        children: its descendants' CPU seconds so far.
    """

    def __init__(
        self,
        spawning: Collection[str] = ("browser",),
        *,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.process_time,
        children: Callable[[], float] = descendants_cpu,
    ) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)  # CPU seconds each fetcher was given so far
        self._spawning = frozenset(spawning)
        self._clock, self._cpu, self._children = clock, cpu, children
        self._active: Counter[str] = Counter()
        self._busy: defaultdict[str, float] = defaultdict(float)  # download-seconds since the last sample
        self._mark = clock()
        self._last_cpu = cpu()
        self._last_children = 0.0
        self._watching_children = False

    def started(self, fetcher: str) -> None:
        self._advance()
        self._active[fetcher] += 1
        if fetcher in self._spawning and not self._watching_children:
            self._watching_children = True
            self._last_children = self._children()

    def finished(self, fetcher: str) -> None:
        self._advance()
        self._active[fetcher] -= 1

    @property
    def watching_children(self) -> bool:
        """Whether a fetcher that starts programs has run (their CPU is then read at each sample)."""
        return self._watching_children

    def sample(self, children: float | None = None) -> None:
        """Share out the CPU used since the last sample (``children``: the descendants' CPU seconds
        now, read by the caller off the event loop; else read here)."""
        self._advance()
        cpu = self._cpu()
        used, self._last_cpu = cpu - self._last_cpu, cpu
        self._share(used, self._busy)
        if self._watching_children:
            children = self._children() if children is None else children
            spawned, self._last_children = max(0.0, children - self._last_children), children
            self._share(spawned, {k: v for k, v in self._busy.items() if k in self._spawning})
        self._busy.clear()

    def _share(self, seconds: float, busy: Mapping[str, float]) -> None:
        total = sum(busy.values())
        if seconds <= 0 or total <= 0:
            return
        for fetcher, share in busy.items():
            self.seconds[fetcher] += seconds * share / total

    def _advance(self) -> None:
        now = self._clock()
        elapsed, self._mark = now - self._mark, now
        if elapsed > 0:
            for fetcher, count in self._active.items():
                if count:
                    self._busy[fetcher] += count * elapsed
