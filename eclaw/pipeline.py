"""Item pipelines: ordered processors every item passes through, and the
dead-letter file for items none could store."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from eclaw.spider import Spider

__all__ = ["DeadLetter", "FunctionPipeline", "ItemPipeline", "as_pipeline", "item_to_dict"]

logger = logging.getLogger(__name__)


@runtime_checkable
class ItemPipeline(Protocol):
    """An item processor.

    ``process_item`` returns the item (possibly changed) to pass it on, or
    raises ``DropItem(reason)``; any other exception sends the item to the
    dead-letter file. ``open`` and ``close`` run once per crawl; ``close``
    must flush whatever it buffered.
    """

    async def open(self, spider: Spider) -> None: ...

    async def process_item(self, item: Any, spider: Spider) -> Any: ...

    async def close(self, spider: Spider) -> None: ...


class FunctionPipeline:
    """Adapts ``async def fn(item, spider) -> item`` to :class:`ItemPipeline`."""

    def __init__(self, fn: Callable[[Any, Spider], Awaitable[Any]]) -> None:
        self.fn = fn

    def __repr__(self) -> str:
        return f"FunctionPipeline({getattr(self.fn, '__qualname__', self.fn)!r})"

    async def open(self, spider: Spider) -> None:
        return None

    async def process_item(self, item: Any, spider: Spider) -> Any:
        return await self.fn(item, spider)

    async def close(self, spider: Spider) -> None:
        return None


def as_pipeline(obj: Any) -> ItemPipeline:
    """``obj`` as a pipeline: an :class:`ItemPipeline` or an async function."""
    if isinstance(obj, ItemPipeline):
        return obj
    if callable(obj):
        return FunctionPipeline(obj)
    raise TypeError(
        f"{obj!r} is not a pipeline: give an object with async open/process_item/close "
        "or an async function (item, spider) -> item"
    )


def item_to_dict(item: Any) -> dict[str, Any]:
    """A plain dict of an item (dict or dataclass instance)."""
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return dataclasses.asdict(item)
    return dict(item)


class DeadLetter:
    """JSONL file of items that a pipeline failed on, opened on first use."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.count = 0
        self._file: IO[str] | None = None

    def write(self, item: Any, *, error: BaseException, stage: str, url: str | None) -> None:
        if self._file is None:
            self._file = self.path.open("a", encoding="utf-8")
        try:
            data: Any = item_to_dict(item)
        except (TypeError, ValueError):
            data = repr(item)
        record = {
            "time": time.time(),
            "url": url,
            "stage": stage,
            "error": f"{type(error).__name__}: {error}",
            "item": data,
        }
        self._file.write(json.dumps(record, default=str, ensure_ascii=False) + "\n")
        self._file.flush()
        self.count += 1
        logger.error("item dead-lettered to %s (%s: %s)", self.path, stage, error)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
