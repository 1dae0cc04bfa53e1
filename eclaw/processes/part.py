"""One process of a crawl on several (``eclaw crawl ... --processes N``), forked by the parent once the
spider is loaded (so it imports nothing again). It crawls its part of the URLs as one process crawls a
whole site (its own frontier, dupe filter, state and item file) and trades links with the others
through the crawl's files (:mod:`eclaw.frontier.mesh`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eclaw.exceptions import EclawError
from eclaw.frontier.mesh import Mesh
from eclaw.frontier.partition import PartFrontier
from eclaw.processes.fork import fork as fork_process
from eclaw.settings import Settings
from eclaw.spider import Spider
from eclaw.stats import Stats

if TYPE_CHECKING:
    from eclaw.engine import Engine

__all__ = ["PAUSED", "Job", "Runner", "fork"]

PAUSED = 4  # the exit code of a process stopped before the crawl's end (its state saved, with --state)


@dataclass
class Job:
    """What the parent tells process ``part`` of ``count``."""

    part: int
    count: int
    mesh: str  # the crawl's files
    items: str  # this process's item file (JSONL)
    state: str = ""  # this process's state directory (--state)
    args: dict[str, str] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)


Runner = Callable[["Engine", type[Spider], dict[str, str]], Awaitable[Stats]]  # one crawl, Ctrl-C a pause


def fork(job: Job, spider_cls: type[Spider], runner: Runner) -> int:
    """Start process ``job.part`` (see :func:`eclaw.processes.fork.fork`); its pid."""
    return fork_process(lambda: _run(job, spider_cls, runner))


def _run(job: Job, spider_cls: type[Spider], runner: Runner) -> int:
    try:  # logging as the parent set it up before the fork
        return asyncio.run(_crawl(job, spider_cls, runner))
    except EclawError as exc:  # the parent says it, once, as its own one-line error
        (Path(job.mesh) / f"error-{job.part}").write_text(str(exc))
        return 2


async def _crawl(job: Job, spider_cls: type[Spider], runner: Runner) -> int:
    from eclaw.engine import Engine

    Path(job.items).parent.mkdir(parents=True, exist_ok=True)
    frontier = PartFrontier(Mesh(Path(job.mesh), job.part, job.count))
    overrides = job.overrides | {"state_dir": job.state, "store": ""}
    engine = Engine(Settings.from_env(), overrides=overrides, outputs=[job.items], frontier=lambda: frontier)
    stats = await runner(engine, spider_cls, job.args)
    (Path(job.mesh) / f"stats-{job.part}.json").write_text(json.dumps(stats.as_dict(), default=str))
    reason = stats.finish_reason
    return 0 if reason in ("finished", "already finished") or reason.startswith("closespider") else PAUSED
