"""``eclaw crawl ... --processes N``: one crawl on N processes of this machine.

Each process crawls its own part of the URLs (:mod:`eclaw.frontier.partition`: a URL's
owner follows from its fingerprint, or its host when the host is paced as a whole) with
its own frontier, dupe filter, item file and, with ``--state``, saved state
(``DIR/part-K``); the processes hand each other the links of the others' parts through
files (``DIR/mesh``, :mod:`eclaw.frontier.mesh`), and lend part of their queue to one that
has run out of work. The parent forks them once the spider
is loaded, watches them (:class:`~eclaw.processes.group.Group`), then writes their items
to the outputs. Ctrl-C pauses every process; with ``--state`` the same command (with
the same N) resumes.

An earlier design shared a private redis-server among the processes, as the cluster
does; every page then cost a process twice the CPU of a page crawled alone (leases,
slots, items as JSON through Redis), and two processes crawled slower than one
(``docs/benchmarks.md``). Here nothing is shared on a page's way but its links.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

from eclaw.contracts import WatchesPages
from eclaw.exceptions import ConfigError
from eclaw.outputs.build import output_for
from eclaw.processes.fork import SIGNALS
from eclaw.processes.group import Group
from eclaw.processes.outputs import RECORDS, finish_outputs, merged_stats
from eclaw.processes.part import Job, Runner, fork
from eclaw.security.redact import redact_url
from eclaw.settings import Settings
from eclaw.spider import Spider
from eclaw.stats import Stats

__all__ = ["check_saved", "crawl_processes", "processes_wanted", "sweep_scratch"]

FINISHED = "finished"  # a marker file in the state directory
_DIVIDED = ("max_pages", "max_items", "max_errors")  # budgets the processes share: each its part
_SCRATCH = "eclaw-crawl-"  # the prefix of a crawl's directory without --state, in the temporary directory


def processes_wanted(value: str) -> int:
    """``--processes N`` or ``auto`` (every core); a one-line error otherwise."""
    if value == "auto":
        return os.cpu_count() or 1
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"--processes expects a number of processes or 'auto', got {value!r}")
    return int(value)


def check_saved(directory: Path, processes: int) -> None:
    """A crawl saved in ``directory`` resumes on as many processes as it ran on: a one-line error if not."""
    try:
        before = int((directory / "mesh" / "count").read_text())
    except (FileNotFoundError, ValueError):
        before = 1 if (directory / "state.sqlite").exists() else processes  # one process's, or nothing saved
    if before != processes:
        raise ConfigError(
            f"the crawl in {directory} was saved on {before} processes: resume it with --processes {before}"
        )
    if (directory / "redis").exists():
        raise ConfigError(f"the crawl in {directory} was saved by an older eclaw (Redis): use a new directory")


def crawl_processes(
    spider_cls: type[Spider],
    spider_args: dict[str, str],
    *,
    processes: int,
    settings: Settings,
    overrides: dict[str, Any],
    outputs: list[str],
    state: str,
    runner: Runner,
) -> Stats:
    """Run the crawl on ``processes`` processes (each runs its part with ``runner``); the merged stats
    (``finish_reason`` as one process would say). A crawl stopped before its end keeps its items for
    the resume with ``--state``; without, they go to the outputs at once, as one process's would be there."""
    for output in outputs:  # the processes' items meet in the outputs at the end; their pages would not
        if isinstance(output_for(output), WatchesPages):
            raise ConfigError(f"output {redact_url(output)} keeps pages, not items: not with --processes (use one)")
    if state and (Path(state) / FINISHED).exists():
        return Stats(spider=spider_cls.name, finish_reason="already finished")
    directory = Path(state) if state else _scratch()
    try:
        mesh = _prepare(directory, processes)
        effective = settings.replace(overrides)
        jobs = [_job(k, directory, spider_args, overrides, effective, saved=bool(state)) for k in range(processes)]
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # a Ctrl-C from here waits for the watcher's handler
        try:
            group = Group(mesh, [fork(job, spider_cls, runner) for job in jobs])
            codes = asyncio.run(group.watch())
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
        for k in range(processes):
            if (mesh / f"error-{k}").exists():
                raise ConfigError((mesh / f"error-{k}").read_text())
        stats = merged_stats(mesh, processes, spider_cls.name)
        stats.finish_reason = group.outcome(codes)
        ended = stats.finish_reason == "finished" or stats.finish_reason.startswith("closespider")
        if ended or not state:
            finish_outputs(outputs, jobs, spider_cls, spider_args, effective, stats)
        if ended and state:
            (directory / FINISHED).write_text(json.dumps(stats.as_dict(), default=str))
        return stats
    finally:
        if not state:
            shutil.rmtree(directory, ignore_errors=True)


def _scratch() -> Path:
    """A directory for a crawl without ``--state`` (removed at its end), after removing those that crawls
    killed with SIGKILL left: the process that made one (its ``pid`` file) is gone."""
    sweep_scratch(Path(tempfile.gettempdir()))
    directory = Path(tempfile.mkdtemp(prefix=_SCRATCH))
    (directory / "pid").write_text(str(os.getpid()))
    return directory


def sweep_scratch(parent: Path) -> int:
    """Remove this user's scratch directories in ``parent`` whose crawl is gone; how many went."""
    removed = 0
    for folder in parent.glob(_SCRATCH + "*"):
        try:
            if folder.stat().st_uid != os.getuid():
                continue
            os.kill(int((folder / "pid").read_text()), 0)
            continue  # its crawl runs (or its pid was taken again: kept, which is safe)
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            continue  # being made now, or not ours to judge
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
    return removed


def _prepare(directory: Path, processes: int) -> Path:
    """The crawl's files (``check_saved`` first), the last run's end and status cleared."""
    mesh = directory / "mesh"
    mesh.mkdir(parents=True, exist_ok=True)
    (mesh / "count").write_text(str(processes))
    for pattern in ("status-*", "stats-*", "error-*", "*.base", "end"):
        for stale in mesh.glob(pattern):
            stale.unlink()
    return mesh


def _job(
    k: int, directory: Path, args: dict[str, str], overrides: dict[str, Any], settings: Settings,
    *, saved: bool,
) -> Job:  # fmt: skip
    """What process ``k`` is told: its item file, its state, its own files of record, its part of the budgets."""
    part, count = directory / f"part-{k}", int((directory / "mesh" / "count").read_text())
    child = {key: value for key, value in overrides.items() if key != "state_dir"}
    child |= {name: str(part / f"{name}.jsonl") for name in RECORDS if getattr(settings, name)}
    child |= {name: math.ceil(getattr(settings, name) / count) for name in _DIVIDED if getattr(settings, name)}
    if pages := settings.max_pages:  # a promise (downloads started): the parts add up to it, never more
        if pages < count:
            raise ConfigError(f"max_pages={pages} is less than --processes {count}: each process needs a page")
        child["max_pages"] = pages // count + (k < pages % count)
    return Job(k, count, str(directory / "mesh"), str(part / "items.jsonl"), str(part) if saved else "", args, child)
