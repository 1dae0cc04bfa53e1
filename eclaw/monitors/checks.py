"""The monitors: each looks at a :class:`RunView` and says whether the run is within its bound.

A monitor with ``early = True`` is also checked while the crawl runs (a maximum already passed
stays passed); the others only at the end.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from eclaw.stats import Stats

__all__ = [
    "Change",
    "Duration",
    "ErrorRate",
    "FieldCoverage",
    "FinishReason",
    "ItemCount",
    "Monitor",
    "Result",
    "Retries",
    "RunView",
    "ValidationRate",
]


@dataclass(slots=True)
class RunView:
    """What monitors see: the crawl's stats, the fields of the stored items, the previous run's stats
    (same spider and run key, finished; ``None``: no previous run) and whether the crawl has ended."""

    stats: Stats
    items: int = 0
    fields: Counter[str] = field(default_factory=Counter)
    previous: dict[str, Any] | None = None
    final: bool = False


@dataclass(frozen=True, slots=True)
class Result:
    """One monitor's verdict: its ``name``, ``ok``, the ``value`` seen and a one-line ``message``."""

    name: str
    ok: bool
    value: float | str | None
    message: str

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "value": self.value, "message": self.message}


class Monitor(Protocol):
    """A check of a run; ``check`` returns ``None`` when it has nothing to say yet."""

    @property
    def name(self) -> str:
        """The monitor's name in results and alerts."""

    @property
    def early(self) -> bool:
        """Whether it is also checked during the run."""

    def check(self, view: RunView) -> Result | None: ...


def _rate(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _bounds(name: str, value: float, low: float | None, high: float | None, what: str) -> Result:
    if low is not None and value < low:
        return Result(name, False, value, f"{what} {value:g} is below the minimum {low:g}")
    if high is not None and value > high:
        return Result(name, False, value, f"{what} {value:g} is above the maximum {high:g}")
    return Result(name, True, value, f"{what} {value:g} within bounds")


@dataclass(frozen=True, slots=True)
class ItemCount:
    """Items stored between ``min`` and ``max`` (the maximum is checked during the run too)."""

    min: int | None = None
    max: int | None = None
    name: str = "item_count"
    early: bool = True

    def check(self, view: RunView) -> Result | None:
        if not view.final and (self.max is None or view.items <= self.max):
            return None
        return _bounds(self.name, view.items, self.min if view.final else None, self.max, "items stored")


@dataclass(frozen=True, slots=True)
class FieldCoverage:
    """``field`` present (not ``None``, not empty) in at least ``min`` (0..1) of the stored items."""

    field: str
    min: float = 1.0
    name: str = ""
    early: bool = False

    def check(self, view: RunView) -> Result | None:
        name = self.name or f"coverage.{self.field}"
        if not view.items:
            return Result(name, False, None, f"no item stored: coverage of {self.field!r} unknown")
        share = view.fields[self.field] / view.items
        ok = share >= self.min
        said = f"{self.field!r} in {share:.1%} of {view.items} items (minimum {self.min:.1%})"
        return Result(name, ok, round(share, 4), said)


@dataclass(frozen=True, slots=True)
class ValidationRate:
    """Items dropped (validation errors, a pipeline's DropItem) at most ``max`` of the items parsed."""

    max: float
    name: str = "validation_error_rate"
    early: bool = False

    def check(self, view: RunView) -> Result | None:
        rate = _rate(view.stats.items_dropped, view.stats.items_parsed)
        return _bounds(self.name, round(rate, 4), None, self.max, "item drop rate")


@dataclass(frozen=True, slots=True)
class ErrorRate:
    """Failed requests (HTTP errors, timeouts...) at most ``max`` of the requests that ended, and at
    most ``max_count`` of them (checked during the run too)."""

    max: float | None = None
    max_count: int | None = None
    name: str = "http_error_rate"
    early: bool = True

    def check(self, view: RunView) -> Result | None:
        failed = view.stats.requests_failed
        if self.max_count is not None and failed > self.max_count:
            return Result(self.name, False, failed, f"{failed} failed requests, above the maximum {self.max_count}")
        if not view.final:
            return None
        rate = _rate(failed, view.stats.requests_parsed + failed)
        return _bounds(self.name, round(rate, 4), None, self.max, "failed request rate")


@dataclass(frozen=True, slots=True)
class FinishReason:
    """The crawl ended for one of ``allowed`` (default: ``finished``)."""

    allowed: tuple[str, ...] = ("finished",)
    name: str = "finish_reason"
    early: bool = False

    def check(self, view: RunView) -> Result | None:
        reason = view.stats.finish_reason
        ok = reason in self.allowed
        return Result(self.name, ok, reason, f"finished: {reason!r}" + ("" if ok else f", not one of {self.allowed}"))


@dataclass(frozen=True, slots=True)
class Retries:
    """At most ``max`` retries (checked during the run too)."""

    max: int
    name: str = "retries"
    early: bool = True

    def check(self, view: RunView) -> Result | None:
        if not view.final and view.stats.retries <= self.max:
            return None
        return _bounds(self.name, view.stats.retries, None, self.max, "retries")


@dataclass(frozen=True, slots=True)
class Duration:
    """The crawl lasts at most ``max`` seconds (checked during the run too)."""

    max: float
    name: str = "duration"
    early: bool = True

    def check(self, view: RunView) -> Result | None:
        end = view.stats.finished_at or time.time()
        seconds = round(end - view.stats.started_at, 3)
        if not view.final and seconds <= self.max:
            return None
        return _bounds(self.name, seconds, None, self.max, "duration (s)")


@dataclass(frozen=True, slots=True)
class Change:
    """Items stored fell by at most ``max_drop`` (0..1) against the previous finished run of the same
    spider and run key (from the store's run log); passes when there is no previous run."""

    max_drop: float = 0.3
    name: str = "change.items"
    early: bool = False

    def check(self, view: RunView) -> Result | None:
        if view.previous is None:
            return Result(self.name, True, None, "no previous finished run to compare with")
        before = int(view.previous.get("items_stored", 0))
        drop = _rate(before - view.items, before)
        ok = drop <= self.max_drop
        said = f"items {before} -> {view.items} ({-drop:+.1%}; largest drop allowed {self.max_drop:.0%})"
        return Result(self.name, ok, round(drop, 4), said)
