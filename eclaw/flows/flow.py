"""Flows: a DAG of crawl tasks (spiders or plain functions) run in dependency order.

    flow = Flow("shop")

    @flow.task(retries=2)
    async def fetch(ctx): ...

    @flow.task(depends_on=["fetch"], start_urls=lambda ctx: ctx["fetch"]["urls"])
    class Details(Spider): ...

The graph is checked before anything runs (duplicate names, unknown and self
dependencies, cycles). Independent branches run concurrently; a task that
finally fails marks everything downstream ``upstream_failed``. What each task
ended as is kept per (flow, run key) by :mod:`eclaw.flowstate`, so a re-run of
the same key skips the tasks that already succeeded.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eclaw.exceptions import ConfigError, EclawError
from eclaw.spider import Spider

__all__ = ["Context", "Flow", "FlowError", "Items", "Task", "TaskFailed"]


class FlowError(ConfigError):
    """The flow cannot run as defined: a cycle, an unknown or self dependency, a duplicate name."""


class TaskFailed(EclawError):
    """A task's own way to fail with a message (no traceback needed)."""


@dataclass
class Task:
    """One step of a flow: a function (sync or async, given the :class:`Context`) or a Spider class."""

    name: str
    target: Callable[..., Any] | type[Spider]
    depends_on: tuple[str, ...] = ()
    retries: int = 0
    retry_delay: float = 1.0
    backoff: float = 2.0
    timeout: float | None = None
    run_if: Callable[[Context], bool] | None = None
    start_urls: Callable[[Context], Iterable[str]] | None = None
    spider_args: dict[str, Any] | Callable[[Context], dict[str, Any]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def is_spider(self) -> bool:
        return isinstance(self.target, type) and issubclass(self.target, Spider)


class Items:
    """What a spider task stored: its items (a JSONL file) and its crawl stats."""

    def __init__(self, path: str | Path, stats: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.stats = dict(stats or {})

    def __repr__(self) -> str:
        return f"Items({str(self.path)!r})"

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as file:
            for line in file:
                if line.strip():
                    yield json.loads(line)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def values(self, name: str) -> list[Any]:
        """One field of every item (``ctx["lists"].values("url")``), skipping items without it."""
        return [item[name] for item in self if name in item]

    def to_json(self) -> dict[str, Any]:
        return {"$items": str(self.path), "stats": self.stats}


def result_to_json(value: Any) -> str:
    """A task's result as JSON (how a re-run gets it back); raises :class:`TaskFailed` if it is not JSON."""
    try:
        return json.dumps(value.to_json() if isinstance(value, Items) else value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise TaskFailed(f"its result is not JSON ({exc}): return dicts, lists, strings and numbers") from None


def result_from_json(text: str | None) -> Any:
    if text is None:
        return None
    value = json.loads(text)
    if isinstance(value, dict) and "$items" in value:
        return Items(value["$items"], value.get("stats"))
    return value


class Context(Mapping[str, Any]):
    """What a task sees: the results of the tasks it depends on (``ctx["lists"]``), the
    flow's ``params`` (``-a NAME=VALUE``), the ``run_key`` and its task's ``name``."""

    def __init__(self, flow: str, run_key: str, params: Mapping[str, Any], results: Mapping[str, Any]) -> None:
        self.flow = flow
        self.run_key = run_key
        self.params = dict(params)
        self._results = results
        self.name = ""

    def __getitem__(self, task: str) -> Any:
        if task not in self._results:
            raise KeyError(f"no result of task {task!r} (is it in depends_on?)")
        return self._results[task]

    def __iter__(self) -> Iterator[str]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)


class Flow:
    """A named DAG of tasks.

    Args:
        name: the flow's name (state, logs and outputs are kept under it).
        concurrency: tasks running at once.
        timeout: seconds for the whole run (``None``: no limit).
    """

    def __init__(self, name: str, *, concurrency: int = 4, timeout: float | None = None) -> None:
        if not name or "/" in name:
            raise FlowError(f"bad flow name {name!r}")
        if concurrency < 1:
            raise FlowError(f"flow {name!r}: concurrency must be at least 1, got {concurrency}")
        self.name = name
        self.concurrency = concurrency
        self.timeout = timeout
        self.tasks: dict[str, Task] = {}

    def __repr__(self) -> str:
        return f"Flow({self.name!r}, tasks={list(self.tasks)})"

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

    def add(self, target: Any, *, name: str | None = None, after: Iterable[str] = (), **options: Any) -> Task:
        """Add ``target`` as a task running after the tasks named in ``after``."""
        if not callable(target):
            raise FlowError(f"flow {self.name!r}: a task must be a function or a Spider class, got {target!r}")
        is_spider = isinstance(target, type) and issubclass(target, Spider)
        task_name = name or (getattr(target, "name", None) if is_spider else None) or target.__name__
        if task_name in self.tasks:
            raise FlowError(f"flow {self.name!r}: task {task_name!r} is defined twice")
        deps = (after,) if isinstance(after, str) else tuple(after)
        try:
            task = Task(task_name, target, tuple(getattr(d, "__name__", d) for d in deps), **options)
        except TypeError as exc:
            raise FlowError(f"flow {self.name!r}, task {task_name!r}: {exc}") from None
        if not is_spider and (task.start_urls or task.spider_args or task.settings):
            raise FlowError(f"task {task_name!r}: start_urls, spider_args and settings are for spider tasks")
        if task.retries < 0 or task.retry_delay < 0 or task.backoff < 1:
            raise FlowError(f"task {task_name!r}: retries and retry_delay must be >= 0, backoff >= 1")
        self.tasks[task_name] = task
        return task

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
        from eclaw.flows.runner import run_flow

        key = run_key or dt.datetime.now(dt.UTC).date().isoformat()
        return await run_flow(self, key, store=store, data_dir=data_dir, params=params, force=force, sleep=sleep)

    # -- the graph --------------------------------------------------------------------

    def order(self) -> list[str]:
        """The tasks in a dependency order (Kahn); raises :class:`FlowError` naming what is wrong."""
        for task in self.tasks.values():
            for dep in task.depends_on:
                if dep == task.name:
                    raise FlowError(f"flow {self.name!r}: task {task.name!r} depends on itself")
                if dep not in self.tasks:
                    raise FlowError(f"flow {self.name!r}: task {task.name!r} depends on unknown task {dep!r}")
        waiting = {name: len(set(task.depends_on)) for name, task in self.tasks.items()}
        ready = [name for name, n in waiting.items() if n == 0]
        order: list[str] = []
        while ready:
            name = ready.pop(0)
            order.append(name)
            for child in self.downstream(name, direct=True):
                waiting[child] -= 1
                if waiting[child] == 0:
                    ready.append(child)
        if len(order) < len(self.tasks):
            cycle = self._cycle({name for name, n in waiting.items() if n > 0})
            raise FlowError(f"flow {self.name!r} has a cycle: {' -> '.join(cycle)}")
        return order

    def _cycle(self, stuck: set[str]) -> list[str]:
        """One cycle among the tasks Kahn could not order (each has a dependency in ``stuck``)."""
        path: list[str] = []
        node = min(stuck)
        while node not in path:
            path.append(node)
            node = min(dep for dep in self.tasks[node].depends_on if dep in stuck)
        cycle = [*path[path.index(node) :], node]
        return cycle[::-1]  # in the direction work would flow

    def downstream(self, name: str, *, direct: bool = False) -> list[str]:
        """Tasks that depend on ``name`` (directly, or at any distance)."""
        children = [t.name for t in self.tasks.values() if name in t.depends_on]
        if direct:
            return children
        seen: list[str] = []
        while children:
            child = children.pop(0)
            if child not in seen:
                seen.append(child)
                children += [t.name for t in self.tasks.values() if child in t.depends_on]
        return seen

    def show(self) -> str:
        """The DAG as a text tree (a task with several parents appears under each)."""
        order = self.order()
        lines = [f"flow {self.name} ({len(order)} tasks)"]

        def walk(name: str, prefix: str, last: bool, seen: set[str]) -> None:
            task = self.tasks[name]
            kind = "spider" if task.is_spider else "function"
            extra = f", after {', '.join(task.depends_on)}" if len(task.depends_on) > 1 else ""
            again = name in seen
            lines.append(f"{prefix}{'└── ' if last else '├── '}{name} [{kind}{extra}]{' (see above)' if again else ''}")
            if again:
                return
            seen.add(name)
            children = [c for c in order if c in self.downstream(name, direct=True)]
            for i, child in enumerate(children):
                walk(child, prefix + ("    " if last else "│   "), i == len(children) - 1, seen)

        roots = [name for name in order if not self.tasks[name].depends_on]
        seen: set[str] = set()
        for i, root in enumerate(roots):
            walk(root, "", i == len(roots) - 1, seen)
        return "\n".join(lines)

    def dot(self) -> str:
        """The DAG in Graphviz ``dot`` syntax."""
        self.order()
        lines = [f'digraph "{self.name}" {{', "  rankdir=LR;"]
        for task in self.tasks.values():
            shape = "box" if task.is_spider else "ellipse"
            lines.append(f'  "{task.name}" [shape={shape}];')
            lines += [f'  "{dep}" -> "{task.name}";' for dep in task.depends_on]
        lines.append("}")
        return "\n".join(lines)


def accepts_context(func: Callable[..., Any]) -> bool:
    """Whether ``func`` takes an argument (the context)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


async def call_function(task: Task, ctx: Context) -> Any:
    """Run a function task: a coroutine function in the loop, a plain function in a thread."""
    func = task.target
    args = (ctx,) if accepts_context(func) else ()
    if inspect.iscoroutinefunction(func):
        return await func(*args)
    result = await asyncio.to_thread(func, *args)
    if inspect.isawaitable(result):
        return await result
    return result
