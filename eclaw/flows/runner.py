"""Running a flow: dependency order, concurrency, retries with backoff, timeouts, state per run key, logs.

State lives in an SQLite file (default ``eclaw-data/flows.sqlite``)::

    flow_tasks(flow, run_key, task, state, attempts, started_at, finished_at, result JSON, error, run_id)
    flow_runs(id, flow, run_key, started_at, finished_at, status, log)

A task's state is ``success``, ``failed``, ``upstream_failed`` or ``skipped``
(``running`` while it runs). A re-run of a (flow, run key) keeps the results
of tasks that succeeded and runs the others; ``force`` re-runs the named tasks
and everything downstream of them.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import logging
import sqlite3
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eclaw.engine import Engine
from eclaw.exceptions import ConfigError, FlowError, TaskFailed
from eclaw.flows.graph import Graph
from eclaw.flows.tasks import Context, Items, Task, call_function, result_from_json, result_to_json
from eclaw.observe.logs import Redacting
from eclaw.security.redact import Redactor, is_secret_arg
from eclaw.storage import sqlite

__all__ = ["FlowLogFilter", "TaskRecord", "load_records", "run_flow"]

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS flow_runs (
    id INTEGER PRIMARY KEY, flow TEXT NOT NULL, run_key TEXT NOT NULL, started_at REAL NOT NULL,
    finished_at REAL, status TEXT, log TEXT
);
CREATE TABLE IF NOT EXISTS flow_tasks (
    flow TEXT NOT NULL, run_key TEXT NOT NULL, task TEXT NOT NULL, state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, started_at REAL, finished_at REAL, result TEXT, error TEXT,
    run_id INTEGER, PRIMARY KEY (flow, run_key, task)
);
"""
_CONTEXT: contextvars.ContextVar[tuple[int, str, int]] = contextvars.ContextVar("eclaw_flow", default=(0, "-", 0))
Sleep = Callable[[float], Awaitable[Any]]


@dataclass
class TaskRecord:
    """How a task of one run key stands."""

    task: str
    state: str = "pending"
    attempts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    result: str | None = None  # JSON
    cached: bool = False  # succeeded in an earlier run of this key: not run again

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at


def _connect(path: Path) -> sqlite3.Connection:
    try:
        return sqlite.connect(path, _SCHEMA)
    except (OSError, sqlite3.Error) as exc:
        raise ConfigError(f"cannot open the flow state {path}: {exc}") from None


def load_records(path: Path, flow: str, run_key: str) -> dict[str, TaskRecord]:
    """The saved state of each task of (``flow``, ``run_key``); empty if it never ran."""
    if not path.exists():
        return {}
    db = _connect(path)
    try:
        rows = db.execute(
            "SELECT task, state, attempts, started_at, finished_at, error, result FROM flow_tasks"
            " WHERE flow = ? AND run_key = ?",
            (flow, run_key),
        ).fetchall()
    finally:
        db.close()
    return {row[0]: TaskRecord(*row) for row in rows}


class FlowLogFilter(logging.Filter):
    """Stamps every record with the run id, task and attempt of the flow task it came from."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.run_id, record.task, record.attempt = _CONTEXT.get()
        return True


class _OneTraceback(logging.Formatter):
    """Tracebacks are printed once, after the line that reports the final failure."""

    def formatException(self, ei: Any) -> str:
        return "".join(traceback.format_exception(ei[1])).rstrip()


class _Run:
    def __init__(
        self,
        flow: Graph,
        run_key: str,
        *,
        store: Path,
        data_dir: Path,
        params: Mapping[str, Any],
        force: Iterable[str],
        sleep: Sleep,
    ) -> None:
        self.flow = flow
        self.run_key = run_key
        self.store = store
        self.data_dir = data_dir
        self.sleep = sleep
        self.order = flow.order()  # validated before anything runs
        forced: set[str] = set()
        for name in force:
            if name not in flow.tasks:
                raise FlowError(f"flow {flow.name!r}: --force names unknown task {name!r}")
            forced |= {name, *flow.downstream(name)}
        self.records = {name: TaskRecord(name) for name in self.order}
        for name, saved in load_records(store, flow.name, run_key).items():
            if name in self.records and saved.state == "success" and name not in forced:
                saved.cached = True
                self.records[name] = saved
        self.results: dict[str, Any] = {}
        self.params = params
        # what the run writes (its log, its tasks' errors) is redacted; params that look secret are secrets
        self.redactor = Redactor(secrets=[str(v) for k, v in params.items() if v and is_secret_arg(k)])
        self.done = {name: asyncio.Event() for name in self.order}
        self.slots = asyncio.Semaphore(flow.concurrency)
        self.db = _connect(store)
        self.run_id = 0

    # -- state ------------------------------------------------------------------------

    def _save(self, record: TaskRecord) -> None:
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO flow_tasks (flow, run_key, task, state, attempts, started_at, finished_at,"
                " result, error, run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self.flow.name,
                    self.run_key,
                    record.task,
                    record.state,
                    record.attempts,
                    record.started_at,
                    record.finished_at,
                    record.result,
                    self.redactor.text(record.error) if record.error else record.error,
                    self.run_id,
                ),
            )

    def _end(self, record: TaskRecord, state: str, error: str | None = None) -> None:
        record.state, record.error, record.finished_at = state, error, time.time()
        self._save(record)
        self.done[record.task].set()

    # -- running ----------------------------------------------------------------------

    async def run(self) -> dict[str, TaskRecord]:
        with closing(self.db):  # on every path: a log that cannot be opened, a last write that fails
            log_path = self._open_log()
            status = "failed"
            try:
                logger.info(
                    "flow %s run key %s: %d tasks (log %s)", self.flow.name, self.run_key, len(self.order), log_path
                )
                status = await self._run_tasks()
                logger.info("flow %s run key %s: %s (%s)", self.flow.name, self.run_key, status, self._counts())
            finally:
                self._close_log()
                with self.db:
                    self.db.execute(
                        "UPDATE flow_runs SET finished_at = ?, status = ? WHERE id = ?",
                        (time.time(), status, self.run_id),
                    )
        return self.records

    async def _run_tasks(self) -> str:
        """Run every task, within the flow's timeout; the flow's status."""
        tasks = [asyncio.create_task(self._task(name)) for name in self.order]
        try:
            async with asyncio.timeout(self.flow.timeout):
                await asyncio.gather(*tasks)
        except TimeoutError:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            logger.error("flow timed out after %ss", self.flow.timeout)
            for record in self.records.values():
                if record.state in ("pending", "running"):
                    self._end(record, "failed", "flow timed out")
        return "success" if all(r.state in ("success", "skipped") for r in self.records.values()) else "failed"

    def _counts(self) -> str:
        counts: dict[str, int] = {}
        for record in self.records.values():
            state = "success (earlier run)" if record.cached else record.state
            counts[state] = counts.get(state, 0) + 1
        return ", ".join(f"{n} {state}" for state, n in counts.items())

    async def _task(self, name: str) -> None:
        task, record = self.flow.tasks[name], self.records[name]
        for dep in task.depends_on:
            await self.done[dep].wait()
        _CONTEXT.set((self.run_id, name, 0))
        if record.cached:
            self.results[name] = result_from_json(record.result)
            logger.info("skipped: succeeded in an earlier run of key %s", self.run_key)
            self.done[name].set()
            return
        failed = [d for d in task.depends_on if self.records[d].state in ("failed", "upstream_failed")]
        if failed:
            logger.warning("upstream_failed: %s did not succeed", ", ".join(failed))
            return self._end(record, "upstream_failed", f"upstream failed: {', '.join(failed)}")
        skipped = [d for d in task.depends_on if self.records[d].state == "skipped"]
        ctx = Context(self.flow.name, self.run_key, self.params, {d: self.results.get(d) for d in task.depends_on})
        ctx.name = name
        if skipped or (task.run_if is not None and not task.run_if(ctx)):
            logger.info("skipped: %s", f"upstream skipped: {', '.join(skipped)}" if skipped else "run_if is false")
            return self._end(record, "skipped", "upstream skipped" if skipped else "run_if is false")
        async with self.slots:
            await self._attempts(task, record, ctx)

    async def _attempts(self, task: Task, record: TaskRecord, ctx: Context) -> None:
        record.started_at, record.attempts, record.state = time.time(), 0, "running"
        delay = task.retry_delay
        while True:
            record.attempts += 1
            _CONTEXT.set((self.run_id, task.name, record.attempts))
            self._save(record)
            logger.info("started")
            try:
                async with asyncio.timeout(task.timeout):
                    result = await self._call(task, ctx)
                record.result = result_to_json(result)
            except Exception as exc:
                message = f"timed out after {task.timeout}s" if isinstance(exc, TimeoutError) else _short(exc)
                if record.attempts <= task.retries:
                    logger.warning("attempt failed: %s; retrying in %.3gs", message, delay)
                    await self.sleep(delay)
                    delay *= task.backoff
                    continue
                shown = None if isinstance(exc, TaskFailed | TimeoutError) else exc  # the traceback, once
                logger.error("failed after %d attempt(s): %s", record.attempts, message, exc_info=shown)
                return self._end(record, "failed", message)
            self.results[task.name] = result
            logger.info("succeeded in %.2fs", time.time() - record.started_at)
            return self._end(record, "success")

    async def _call(self, task: Task, ctx: Context) -> Any:
        if not task.is_spider:
            return await call_function(task, ctx)

        spider_args = task.spider_args(ctx) if callable(task.spider_args) else dict(task.spider_args)
        if task.start_urls is not None:
            spider_args["start_urls"] = list(task.start_urls(ctx))
        out = (self.data_dir / self.flow.name / self.run_key / f"{task.name}.jsonl").resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        overrides = {"store": "", "failures": str(out.with_suffix(".failures.jsonl")), **task.settings}
        async with Engine(overrides=overrides, outputs=[out]) as engine:
            stats = await engine.crawl(task.target, **spider_args)  # type: ignore[arg-type]
        if stats.finish_reason != "finished" and not stats.finish_reason.startswith("closespider"):
            raise RuntimeError(f"the crawl ended early: {stats.finish_reason}")
        return Items(out, {k: v for k, v in stats.as_dict().items() if isinstance(v, int | float | str)})

    # -- log file ---------------------------------------------------------------------

    def _open_log(self) -> Path:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
        path = self.data_dir / "logs" / f"{self.flow.name}-{self.run_key}-{stamp}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with self.db:
            cursor = self.db.execute(
                "INSERT INTO flow_runs (flow, run_key, started_at, log) VALUES (?, ?, ?, ?)",
                (self.flow.name, self.run_key, time.time(), str(path)),
            )
        self.run_id = cursor.lastrowid or 0
        self._token = _CONTEXT.set((self.run_id, "-", 0))
        self._handler = logging.FileHandler(path, encoding="utf-8")
        self._handler.addFilter(FlowLogFilter())
        self._handler.addFilter(Redacting(self.redactor))
        self._handler.setFormatter(
            _OneTraceback("%(asctime)s %(levelname)-7s run=%(run_id)s task=%(task)s attempt=%(attempt)s %(message)s")
        )
        self._root = logging.getLogger("eclaw")
        self._root.addHandler(self._handler)
        self._level = self._root.level
        if self._root.getEffectiveLevel() > logging.INFO:
            self._root.setLevel(logging.INFO)
        return path

    def _close_log(self) -> None:
        _CONTEXT.reset(self._token)
        self._root.removeHandler(self._handler)
        self._root.setLevel(self._level)
        self._handler.close()


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def run_flow(
    flow: Graph,
    run_key: str,
    *,
    store: str | Path = "eclaw-data/flows.sqlite",
    data_dir: str | Path = "eclaw-data/flows",
    params: Mapping[str, Any] | None = None,
    force: Iterable[str] = (),
    sleep: Sleep = asyncio.sleep,
) -> dict[str, TaskRecord]:
    """Run ``flow`` for ``run_key``; returns each task's record. See :meth:`eclaw.flows.Flow.run`."""
    if not run_key or "/" in run_key:
        raise ConfigError(f"bad run key {run_key!r}")
    run = _Run(
        flow,
        run_key,
        store=Path(store),
        data_dir=Path(data_dir),
        params=params or {},
        force=force,
        sleep=sleep,
    )
    return await run.run()
