"""A flow's tasks and what they hand each other: :class:`Task`, :class:`Items`, :class:`Context`."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eclaw.exceptions import TaskFailed
from eclaw.spider import Spider

__all__ = ["Context", "Items", "Task", "call_function", "result_from_json", "result_to_json"]


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
