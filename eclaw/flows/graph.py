"""A flow's graph: its tasks, checked (cycles, unknown or self dependencies), ordered, drawn."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eclaw.exceptions import FlowError
from eclaw.flows.tasks import Task
from eclaw.spider import Spider

__all__ = ["Graph"]


class Graph:
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
