"""Crawl statistics, kept by the engine from the events it dispatches."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["Stats", "merge_stats"]

_PER_RUN = frozenset({"started_at", "finished_at", "finish_reason", "requests_pending", "quality"})


@dataclasses.dataclass(slots=True)
class Stats:
    """Counts of one crawl.

    Every request that entered the engine (``requests_generated``) ends in
    exactly one terminal state, so after a crawl that ran to the end::

        requests_generated == requests_parsed + requests_failed
                              + requests_dropped + requests_pending

    (``requests_pending`` is non-zero only for a crawl stopped early.)
    ``retries`` counts failed attempts that were tried again; ``counters`` holds
    the middlewares' own counts (``"proxy 127.0.0.1:3128 ok"``, ``"cache hit"``...).

    Every output receives every stored item on its own: ``items_written`` counts,
    per output, the items it wrote, and ``items_dead_lettered`` the items that went
    to the dead-letter file instead (per output, or ``"validation"``/a pipeline's
    name for items that reached no output). ``items_lost`` counts items that could
    not even be dead-lettered. :attr:`clean` is false when any item missed an output.
    """

    spider: str = ""
    requests_generated: int = 0
    requests_scheduled: int = 0
    responses_downloaded: int = 0
    requests_parsed: int = 0
    requests_failed: int = 0
    requests_dropped: int = 0
    requests_pending: int = 0
    items_parsed: int = 0
    items_stored: int = 0
    items_dropped: int = 0
    handler_errors: int = 0
    bytes_downloaded: int = 0
    failed_by_reason: Counter[str] = dataclasses.field(default_factory=Counter)
    dropped_by_reason: Counter[str] = dataclasses.field(default_factory=Counter)
    items_dropped_by_reason: Counter[str] = dataclasses.field(default_factory=Counter)
    items_written: Counter[str] = dataclasses.field(default_factory=Counter)
    items_dead_lettered: Counter[str] = dataclasses.field(default_factory=Counter)
    items_lost: int = 0
    status_counts: Counter[int] = dataclasses.field(default_factory=Counter)
    retries: int = 0
    counters: Counter[str] = dataclasses.field(default_factory=Counter)
    quality: list[str] = dataclasses.field(default_factory=list)
    started_at: float = dataclasses.field(default_factory=time.time)
    finished_at: float | None = None
    finish_reason: str = ""

    def add_dropped(self, reason: str) -> None:
        self.requests_dropped += 1
        self.dropped_by_reason[reason] += 1

    def add_dropped_batch(self, reasons: Sequence[str | None]) -> None:
        """Count the drops of one enqueued batch (``None``: accepted), in C where it can: most are duplicates."""
        dropped = len(reasons) - reasons.count(None)
        if dropped:
            self.requests_dropped += dropped
            duplicates = reasons.count("duplicate")
            if duplicates:
                self.dropped_by_reason["duplicate"] += duplicates
            if dropped > duplicates:
                self.dropped_by_reason.update(r for r in reasons if r is not None and r != "duplicate")

    def add_failed(self, reason: str) -> None:
        self.requests_failed += 1
        self.failed_by_reason[reason] += 1

    def add_item_dropped(self, reason: str) -> None:
        self.items_dropped += 1
        self.items_dropped_by_reason[reason] += 1

    def output_failed(self, output: str, count: int = 1) -> None:
        """``count`` items counted as written by ``output`` were dead-lettered after all (a failed batch)."""
        self.items_written[output] -= count
        self.items_dead_lettered[output] += count

    @property
    def clean(self) -> bool:
        """True when every stored item reached every output (nothing dead-lettered or lost)."""
        return not self.items_lost and not any(self.items_dead_lettered.values())

    @property
    def elapsed(self) -> float:
        """Seconds from start to finish (or to now while running)."""
        end = self.finished_at if self.finished_at is not None else time.time()
        return end - self.started_at

    @property
    def accounted(self) -> bool:
        """True when every generated request reached (or awaits) a terminal state."""
        return self.requests_generated == (
            self.requests_parsed + self.requests_failed + self.requests_dropped + self.requests_pending
        )

    def as_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key, value in data.items():
            if isinstance(value, Counter):
                data[key] = {str(k): v for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
        data["elapsed"] = round(self.elapsed, 3)
        return data

    def restore(self, data: dict[str, Any]) -> None:
        """Go on from counts saved with :meth:`as_dict` (a resumed crawl); times,
        finish reason and pending requests stay this run's own."""
        for field in dataclasses.fields(self):
            if field.name not in data or field.name in _PER_RUN:
                continue
            value = data[field.name]
            if isinstance(getattr(self, field.name), Counter):
                convert = int if field.name == "status_counts" else str
                value = Counter({convert(key): count for key, count in value.items()})
            setattr(self, field.name, value)

    def summary(self) -> str:
        """A readable table of the counts."""
        rows: list[tuple[str, Any]] = [
            ("spider", self.spider),
            ("finish reason", self.finish_reason or "running"),
            ("elapsed (s)", f"{self.elapsed:.2f}"),
            ("requests generated", self.requests_generated),
            ("  parsed", self.requests_parsed),
            ("  failed", self.requests_failed),
        ]
        rows += [(f"    {reason}", n) for reason, n in sorted(self.failed_by_reason.items())]
        rows.append(("  dropped", self.requests_dropped))
        rows += [(f"    {reason}", n) for reason, n in sorted(self.dropped_by_reason.items())]
        if self.requests_pending:
            rows.append(("  pending (not crawled)", self.requests_pending))
        rows += [
            ("responses", self.responses_downloaded),
        ]
        rows += [(f"  status {code}", n) for code, n in sorted(self.status_counts.items())]
        rows += [
            ("bytes downloaded", self.bytes_downloaded),
            ("items parsed", self.items_parsed),
            ("  stored", self.items_stored),
        ]
        rows += [(f"    written to {output}", n) for output, n in self.items_written.items()]
        rows.append(("  dropped", self.items_dropped))
        rows += [(f"    {reason}", n) for reason, n in sorted(self.items_dropped_by_reason.items())]
        dead = sum(self.items_dead_lettered.values())
        if dead:
            rows.append(("items dead-lettered", dead))
            rows += [(f"    by {where}", n) for where, n in sorted(self.items_dead_lettered.items()) if n]
        if self.items_lost:
            rows.append(("items lost", self.items_lost))
        if self.retries:
            rows.append(("retries", self.retries))
        rows += sorted(self.counters.items())
        if self.handler_errors:
            rows.append(("handler errors", self.handler_errors))
        rows += [("quality warning", warning) for warning in self.quality]
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def merge_stats(parts: Iterable[dict[str, Any]]) -> Stats:
    """The sum of the stats (:meth:`Stats.as_dict`) of the processes of one crawl; its finish
    reason lists theirs, and it started when the first of them did."""
    merged = Stats()
    reasons = set()
    for data in parts:
        reasons.add(data.get("finish_reason") or "running")
        merged.spider = data.get("spider", merged.spider)
        for name, value in data.items():
            current = getattr(merged, name, None)
            if isinstance(current, Counter):
                current.update({(int(k) if name == "status_counts" else k): v for k, v in value.items()})
            elif isinstance(current, int) and isinstance(value, int) and name != "requests_pending":
                setattr(merged, name, current + value)
        merged.started_at = min(merged.started_at, data.get("started_at", merged.started_at))
    merged.finish_reason = ", ".join(sorted(reasons))
    return merged
