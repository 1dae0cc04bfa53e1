"""Monitors from a TOML file (``eclaw crawl --monitors FILE``) and the command line's use of them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from eclaw.alerts import load_alerts
from eclaw.alerts.config import read_toml
from eclaw.exceptions import ConfigError
from eclaw.monitors.checks import (
    Change,
    Duration,
    ErrorRate,
    FieldCoverage,
    FinishReason,
    ItemCount,
    Monitor,
    Retries,
    ValidationRate,
)
from eclaw.monitors.watch import MONITORS_FAILED_EXIT, MonitorWatcher

if TYPE_CHECKING:
    from eclaw.engine import Engine
    from eclaw.stats import Stats

__all__ = ["DEFAULT_RESULTS", "load_monitors", "monitoring_for"]

DEFAULT_RESULTS = "eclaw-data/{spider}.monitors.json"


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"[monitors] {key} must be a number, not {value!r}")
    return float(value)


def _items(value: Any) -> Monitor:
    if not isinstance(value, Mapping) or set(value) - {"min", "max"}:
        raise ConfigError("[monitors] items must be a table with min and/or max: items = { min = 10 }")
    low, high = value.get("min"), value.get("max")
    least = None if low is None else int(_number(low, "items.min"))
    return ItemCount(least, None if high is None else int(_number(high, "items.max")))


def _coverage(value: Any) -> list[Monitor]:
    if not isinstance(value, Mapping):
        raise ConfigError("[monitors] coverage must be a table: coverage = { price = 0.95 }")
    return [FieldCoverage(str(name), _share(share, f"coverage.{name}")) for name, share in value.items()]


def _share(value: Any, key: str) -> float:
    share = _number(value, key)
    if not 0 <= share <= 1:
        raise ConfigError(f"[monitors] {key} must be between 0 and 1, not {share:g}")
    return share


def _reasons(value: Any) -> Monitor:
    reasons = [value] if isinstance(value, str) else value
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise ConfigError("[monitors] finish_reason must be a string or a list of strings")
    return FinishReason(tuple(reasons))


_MAKERS: dict[str, Callable[[Any], Monitor | list[Monitor]]] = {
    "items": _items,
    "coverage": _coverage,
    "validation_error_rate": lambda v: ValidationRate(_share(v, "validation_error_rate")),
    "http_error_rate": lambda v: ErrorRate(max=_share(v, "http_error_rate")),
    "http_errors": lambda v: ErrorRate(max_count=int(_number(v, "http_errors")), name="http_errors"),
    "finish_reason": _reasons,
    "retries": lambda v: Retries(int(_number(v, "retries"))),
    "duration": lambda v: Duration(_number(v, "duration")),
    "items_drop": lambda v: Change(_share(v, "items_drop")),
}
_OPTIONS = ("results", "interval")


def load_monitors(source: str | Path | Mapping[str, Any]) -> tuple[list[Monitor], dict[str, Any]]:
    """The monitors of a TOML file's ``[monitors]`` table (or a mapping holding it) and its options
    (``results``, ``interval``)."""
    data = read_toml(source) if isinstance(source, str | Path) else dict(source)
    table = data.get("monitors", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: [monitors] must be a table")
    unknown = set(table) - set(_MAKERS) - set(_OPTIONS)
    if unknown:
        known = sorted([*_MAKERS, *_OPTIONS])
        raise ConfigError(f"{source}: unknown [monitors] keys {sorted(unknown)}; known: {known}")
    monitors: list[Monitor] = []
    for key, make in _MAKERS.items():
        if key in table:
            made = make(table[key])
            monitors += made if isinstance(made, list) else [made]
    interval = _number(table.get("interval", 5), "interval")
    if interval <= 0:
        raise ConfigError(f"{source}: [monitors] interval must be > 0")
    return monitors, {"results": str(table.get("results", DEFAULT_RESULTS)), "interval": interval}


class Monitoring:
    """The monitors of one ``eclaw crawl``: attached to its engine, then turned into its exit code."""

    def __init__(self, watcher: MonitorWatcher) -> None:
        self.watcher = watcher

    def attach(self, engine: Engine) -> None:
        self.watcher.attach(engine)

    def exit_code(self, stats: Stats, code: int, out: TextIO | None = None) -> int:
        """Print the results; ``code`` unless it is 0 and a monitor failed (then 3)."""
        out = out or sys.stdout
        for result in self.watcher.results:
            print(f"monitor {result.name}: {'ok' if result.ok else 'FAILED'} - {result.message}", file=out)
        if code == 0 and self.watcher.failed:
            return MONITORS_FAILED_EXIT
        return code


def monitoring_for(path: str | None, spider: type[Any], processes: int) -> Monitoring | None:
    """The monitors of ``eclaw crawl``: the spider's ``monitors`` and those of the file at ``path``
    (with its ``[alerts]``), or ``None`` when there are none. Read before the crawl: a bad file is
    a :class:`ConfigError` (exit 2)."""
    declared: list[Monitor] = list(spider.monitors)
    if path is None and not declared:
        return None
    if processes > 1:
        raise ConfigError("--monitors (or a spider's monitors): not with --processes above 1")
    options: dict[str, Any] = {"results": DEFAULT_RESULTS, "interval": 5.0}
    alerter = None
    if path is not None:
        data = read_toml(path)
        monitors, options = load_monitors(data)
        declared += monitors
        if "alerts" in data:
            alerter = load_alerts(data)
    watcher = MonitorWatcher(declared, alerter=alerter, results=options["results"], interval=options["interval"])
    return Monitoring(watcher)
