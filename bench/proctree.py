"""The CPU and memory of a process tree: a crawler and every process it starts (Chromium's).

CPU: ``run_tree`` waits for the crawler with ``wait4``, whose rusage holds the crawler's CPU
and that of every descendant it (or a descendant of it) waited for. A process whose parent
went without waiting for it would be lost to init: after ``become_subreaper()`` it comes
here instead, and ``run_tree`` waits for it too, adding its CPU.
Memory: ``tree_pss`` sums the proportional set size (shared pages counted once, where summed
RSS would count Chromium's shared libraries once per process) of a tree, sampled while it runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
ORPHANS_GRACE = 30.0  # seconds an orphan gets to exit once the crawler has


def become_subreaper() -> None:
    """Orphans of this process's descendants are re-parented here, not to init (Linux only)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def parents() -> dict[int, int]:
    """Every process's parent, by pid."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                found[int(entry.name)] = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
    return found


def descendants(roots: Iterable[int], tree: dict[int, int] | None = None) -> set[int]:
    """``roots`` and every process under them."""
    tree = parents() if tree is None else tree
    children: dict[int, list[int]] = {}
    for pid, parent in tree.items():
        children.setdefault(parent, []).append(pid)
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def tree_pss(pids: Iterable[int], only: bytes = b"") -> int:
    """Bytes of PSS of ``pids`` (those whose command line holds ``only``, if given)."""
    total = 0
    for pid in pids:
        try:
            if only and only not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:  # gone meanwhile, or a zombie
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
                break
    return total


@dataclass
class TreeRun:
    """One command's run: wall and CPU seconds of its tree, its exit code, its stderr, and
    ``samples`` of (seconds since start, progress, PSS bytes of its tree)."""

    seconds: float
    cpu_seconds: float
    returncode: int
    stderr: str
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    orphans: int = 0


def run_tree(
    argv: list[str],
    *,
    progress: Callable[[], int] = lambda: 0,
    every: float = 0.5,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> TreeRun:
    """Run ``argv`` to its end, sampling its tree's PSS (and ``progress()``) every ``every`` s."""
    ours = os.getpid()
    before = {pid for pid, parent in parents().items() if parent == ours}  # a site server, say: not the tree
    with tempfile.TemporaryFile() as errors:  # a file, not a pipe: a chatty child never blocks on it
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errors, env=env, cwd=cwd)
        samples: list[tuple[float, int, int]] = []
        done = threading.Event()

        def sample() -> None:
            while not done.wait(every):
                tree = parents()
                roots = [process.pid, *(p for p, parent in tree.items() if parent == ours and p not in before)]
                memory = tree_pss(descendants(roots, tree) - {ours})
                samples.append((time.perf_counter() - started, progress(), memory))
            # the progress at the end (the run may end between two samples); its tree is gone by
            # now, so the last memory reading stands for it
            samples.append((time.perf_counter() - started, progress(), samples[-1][2] if samples else 0))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        cpu = usage.ru_utime + usage.ru_stime
        orphans = _reap_orphans(before | {process.pid})
        cpu += sum(orphan.ru_utime + orphan.ru_stime for orphan in orphans)
        done.set()
        sampler.join()
        errors.seek(0)
        text = errors.read().decode(errors="replace")
    return TreeRun(seconds, cpu, process.returncode, text, samples, len(orphans))


def _reap_orphans(known: set[int]) -> list[resource.struct_rusage]:
    """Wait for the processes re-parented here (not in ``known``); kill those that outstay the grace."""
    ours, usages = os.getpid(), []
    deadline = time.monotonic() + ORPHANS_GRACE
    while orphans := [pid for pid, parent in parents().items() if parent == ours and pid not in known]:
        for pid in orphans:
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            try:
                reaped, _, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:  # waited for elsewhere meanwhile
                known.add(pid)
                continue
            if reaped:
                usages.append(usage)
        time.sleep(0.05)
    return usages
