"""Flows: a DAG of crawl tasks (spiders or plain functions) run in dependency order.

    flow = Flow("shop")

    @flow.task(retries=2)
    async def fetch(ctx): ...

    @flow.task(depends_on=["fetch"], start_urls=lambda ctx: ctx["fetch"]["urls"])
    class Details(Spider): ...

The graph is checked before anything runs (duplicate names, unknown and self
dependencies, cycles). Independent branches run concurrently; a task that
finally fails marks everything downstream ``upstream_failed``. What each task
ended as is kept per (flow, run key) by :mod:`eclaw.flows.runner`, so a re-run of
the same key skips the tasks that already succeeded.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from eclaw.exceptions import FlowError, TaskFailed
from eclaw.flows.graph import Graph
from eclaw.flows.runner import run_flow
from eclaw.flows.tasks import Context, Items, Task

__all__ = ["Context", "Flow", "FlowError", "Items", "Task", "TaskFailed"]


class Flow(Graph):
    """A DAG of tasks: add them with :meth:`task` (a decorator) or :meth:`add`, run them with :meth:`run`."""

    def task(
        self, target: Any = None, /, *, name: str | None = None, depends_on: Iterable[str] = (), **options: Any
    ) -> Any:
        """Decorator adding a function or Spider class as a task (bare, or with options).

        Options: ``retries``, ``retry_delay`` (seconds before the first retry),
        ``backoff`` (factor per retry), ``timeout`` (seconds per attempt),
        ``run_if`` (``ctx -> bool``; false marks it ``skipped``), and for spiders
        ``start_urls`` (``ctx -> urls``), ``spider_args`` (dict or ``ctx -> dict``)
        and ``settings``. Returns the target unchanged.
        """

        def register(obj: Any) -> Any:
            self.add(obj, name=name, after=depends_on, **options)
            return obj

        return register(target) if target is not None else register

    async def run(
        self,
        run_key: str | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        force: Iterable[str] = (),
        store: str | Path = "eclaw-data/flows.sqlite",
        data_dir: str | Path = "eclaw-data/flows",
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> dict[str, Any]:
        """Run the flow for ``run_key`` (default: today's date, UTC) and return each task's record.

        Tasks that succeeded in an earlier run of the same key are not run again
        (their results are read back); ``force`` re-runs the named tasks and
        everything downstream. ``store`` keeps the state, ``data_dir`` the spider
        tasks' items and the run logs; ``sleep`` waits between retries (tests pass a fast one).
        """
        key = run_key or dt.datetime.now(dt.UTC).date().isoformat()
        return await run_flow(self, key, store=store, data_dir=data_dir, params=params, force=force, sleep=sleep)
