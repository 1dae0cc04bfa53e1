"""Data-quality checks at the end of a crawl: "no error" is not the same as correct data.

Per item type the crawl profiles what its callbacks yielded: how many items,
and per field how many were null/missing/empty and which value types were
seen. At close the profile is compared with the previous run of the same
spider (kept in the store's ``runs`` table): row count beyond ``ratio``,
required fields with nulls, and changed field types are reported as warnings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import types
import typing
from collections import Counter
from typing import TYPE_CHECKING, Any

from eclaw.contracts import CrawlContext, Handler
from eclaw.events import Event, ItemParsed
from eclaw.items import item_to_dict, item_type

if TYPE_CHECKING:
    from eclaw.storage.store import RunLog

__all__ = ["Profile", "RunRecorder", "compare"]

logger = logging.getLogger(__name__)


class Profile:
    """Counts of one crawl's items, per item type."""

    def __init__(self, required: tuple[str, ...] = ()) -> None:
        self.required_for_dicts = required  # the spider's ``required_fields``
        self.counts: Counter[str] = Counter()
        self.nulls: dict[str, Counter[str]] = {}
        self.types: dict[str, dict[str, set[str]]] = {}
        self.required: dict[str, tuple[str, ...]] = {}

    def observe(self, item: Any) -> None:
        kind = item_type(item)
        self.counts[kind] += 1
        if kind not in self.required:
            self.required[kind] = _required_fields(item) if kind != "dict" else self.required_for_dicts
            self.nulls[kind] = Counter()
            self.types[kind] = {}
        nulls, types_ = self.nulls[kind], self.types[kind]
        row = item_to_dict(item)
        for name in self.required[kind]:
            if name not in row:
                nulls[name] += 1
        for name, value in row.items():
            if value is None or value == "":
                nulls[name] += 1
            else:
                seen = types_.get(name)
                if seen is None:
                    seen = types_[name] = set()
                seen.add(type(value).__name__)

    def as_dict(self) -> dict[str, Any]:
        return {
            kind: {
                "count": count,
                "null_rate": {name: round(n / count, 4) for name, n in sorted(self.nulls[kind].items())},
                "types": {name: sorted(seen) for name, seen in sorted(self.types[kind].items())},
                "required": list(self.required[kind]),
            }
            for kind, count in sorted(self.counts.items())
        }


def compare(current: dict[str, Any], previous: dict[str, Any] | None, ratio: float) -> list[str]:
    """Warnings about ``current`` (a :meth:`Profile.as_dict`) against the previous run's profile."""
    warnings = []
    for kind, now in current.items():
        for name in now["required"]:
            rate = now["null_rate"].get(name, 0)
            if rate:
                warnings.append(f"{kind}: required field {name!r} is empty in {rate:.0%} of items")
        before = (previous or {}).get(kind)
        if not before:
            continue
        if before["count"] and abs(now["count"] - before["count"]) > ratio * before["count"]:
            warnings.append(
                f"{kind}: {now['count']} items, {before['count']} in the previous run (beyond ±{ratio:.0%})"
            )
        for name, seen in now["types"].items():
            old = before["types"].get(name)
            if old and old != seen:
                warnings.append(f"{kind}: field {name!r} changed type: {'/'.join(old)} -> {'/'.join(seen)}")
        gone = sorted(set(before["types"]) - set(now["types"]))
        if gone:
            warnings.append(f"{kind}: fields no longer seen: {', '.join(gone)}")
    for kind, before in (previous or {}).items():
        if kind not in current and before.get("count"):
            warnings.append(f"{kind}: no items this run ({before['count']} in the previous run)")
    return warnings


def _required_fields(item: Any) -> tuple[str, ...]:
    """Fields whose declared type does not admit None."""
    if not (dataclasses.is_dataclass(item) and not isinstance(item, type)):
        fields = getattr(type(item), "model_fields", None)  # pydantic
        return tuple(name for name, info in (fields or {}).items() if info.is_required())
    try:
        hints = typing.get_type_hints(type(item))
    except Exception:
        return ()
    return tuple(f.name for f in dataclasses.fields(item) if not _optional(hints.get(f.name, Any)))


def _optional(hint: Any) -> bool:
    if hint is Any:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(hint)
    return hint is type(None)


class RunRecorder:
    """Records one crawl in the store's runs table and checks its data against the previous run:
    a watcher of its crawl (the items' profile comes from ``ItemParsed``)."""

    def __init__(self, log: RunLog) -> None:
        self.log = log
        self.profile = Profile()
        self._previous: dict[str, Any] | None = None
        self._ratio = 0.3
        self._crawl: CrawlContext | None = None

    def __repr__(self) -> str:
        return f"RunRecorder({self.log.template!r})"

    def subscriptions(self) -> list[tuple[type[Event], Handler]]:
        return [(ItemParsed, self.parsed)]

    def parsed(self, event: ItemParsed) -> None:
        self.profile.observe(event.item)

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        spider, settings = crawl.spider, crawl.settings
        self.profile = Profile(tuple(spider.required_fields))
        self._ratio = settings.quality_count_ratio
        values = json.dumps(dataclasses.asdict(settings), sort_keys=True, default=str)
        digest = hashlib.sha1(values.encode(), usedforsecurity=False).hexdigest()[:12]
        self._previous = await self.log.start(spider.name, settings.run_key, digest)

    async def close(self) -> None:
        """The crawl ended: its stats, profile and warnings into its run's row."""
        if self._crawl is None or self.log.run_id is None:
            return
        stats = self._crawl.stats
        profile = self.profile.as_dict()
        stats.quality = compare(profile, self._previous, self._ratio) if stats.finish_reason == "finished" else []
        for warning in stats.quality:
            logger.warning("data quality: %s", warning)
        try:
            clean = self._crawl.redactor.record  # a run row is a record like any other
            await self.log.finish(clean(stats.as_dict()), profile, clean(stats.quality))
        except Exception as exc:  # the crawl's data is safe; only its run record is missing
            logger.error("could not record the run in %s: %s", self.log.path, exc)
