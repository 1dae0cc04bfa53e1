"""Flow jobs: a project's flow file (a ``.py`` holding one :class:`~eclaw.flows.Flow`) run as a job.

A flow job is stored like a spider job whose ``spider`` is ``flow:FILE.py``; it runs
``eclaw flow run FILE.py --run-key job-ID --store JOBDIR/flows.sqlite --data-dir JOBDIR/flows``
(through :mod:`eclaw.service.launch`: its parameters go on its stdin), so its tasks' states are the
rows the flow runner writes in that store as each task starts and ends (:mod:`eclaw.flows.runner`);
a task with no row yet is ``pending``. A cancel stops the process: the runner then writes no end for
the task it was running, shown ``cancelled`` once the job is over (``pending`` when the job is queued
again, ``failed`` when its process ended otherwise); the tasks after it never start.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from eclaw.exceptions import ConfigError, EclawError
from eclaw.flows.flow import Flow
from eclaw.spider import import_file

__all__ = ["LAUNCH", "PREFIX", "flow_command", "flow_file", "load_graph", "task_states"]

PREFIX = "flow:"
LAUNCH = "eclaw.service.launch"  # the module a job's process runs (python -m)
# the runner's states, as the service shows them
_SHOWN = {"success": "succeeded", "upstream_failed": "skipped", "skipped": "skipped", "failed": "failed",
          "running": "running", "pending": "pending"}  # fmt: skip
_LEFT_RUNNING = {"cancelled": "cancelled", "queued": "pending"}  # by the job's state; else failed


def flow_file(spider: str) -> str | None:
    """The flow file of a job's ``spider`` field (``flow:FILE.py``), or None for a spider job."""
    return spider[len(PREFIX) :] if spider.startswith(PREFIX) else None


_GRAPHS: dict[Path, tuple[float, dict[str, list[str]]]] = {}


def load_graph(path: Path) -> dict[str, list[str]]:
    """Each task of the only flow in ``path`` and the tasks it runs after (a one-line ConfigError if bad);
    kept while the file is unchanged."""
    mtime = path.stat().st_mtime
    cached = _GRAPHS.get(path)
    if cached and cached[0] == mtime:
        return cached[1]
    try:
        module = import_file(path, "flow")
        flows = [obj for obj in vars(module).values() if isinstance(obj, Flow)]
        if len(flows) != 1:
            raise ConfigError(f"{path.name}: {len(flows)} flows in the file, need exactly one")
        order = flows[0].order()
    except EclawError as exc:
        raise ConfigError(str(exc).splitlines()[0]) from None
    graph = {name: list(flows[0].tasks[name].depends_on) for name in order}
    _GRAPHS[path] = (mtime, graph)
    return graph


def flow_command(python: str, file: str, folder: Path, job_id: int) -> list[str]:
    """The command line of a flow job (without its parameters: they go on its stdin)."""
    return [python, "-m", LAUNCH, "flow", "run", file, "--run-key", f"job-{job_id}",
            "--store", str(folder / "flows.sqlite"), "--data-dir", str(folder / "flows")]  # fmt: skip


def task_states(graph: dict[str, list[str]], folder: Path, job_id: int, job_state: str) -> list[dict[str, Any]]:
    """Each task of the job's flow: ``{"name", "after", "state"}`` (pending, running, succeeded, failed,
    skipped, cancelled); ``job_state`` is the job's, which tells what a task left ``running`` became."""
    found: dict[str, str] = {}
    store = folder / "flows.sqlite"
    if store.exists():
        with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(store, timeout=2.0)) as db:
            rows = db.execute("SELECT task, state FROM flow_tasks WHERE run_key = ?", (f"job-{job_id}",))
            found = {str(task): str(state) for task, state in rows}
    # a row left "running" when no process of the job runs: stopped by a cancel, queued again, or lost
    left = "running" if job_state in ("running", "cancelling") else _LEFT_RUNNING.get(job_state, "failed")
    shown = {name: _SHOWN.get(found.get(name, "pending"), "pending") for name in graph}
    return [{"name": name, "after": after, "state": left if shown[name] == "running" else shown[name]}
            for name, after in graph.items()]  # fmt: skip
