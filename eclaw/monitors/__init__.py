"""Monitors: checks of a crawl's results, evaluated during the run and at its end.

Declare them on the spider (``monitors = [ItemCount(min=10), FieldCoverage("price", 0.95)]``) or in a
TOML file (``eclaw crawl --monitors FILE``, which may also hold the ``[alerts]`` table). Results go
into the run's JSON file, its stats (``monitors failed``), the alerts, and the exit code (3).
"""

from eclaw.monitors.checks import (
    Change,
    Duration,
    ErrorRate,
    FieldCoverage,
    FinishReason,
    ItemCount,
    Monitor,
    Result,
    Retries,
    RunView,
    ValidationRate,
)
from eclaw.monitors.config import load_monitors, monitoring_for
from eclaw.monitors.watch import MONITORS_FAILED_EXIT, MonitorWatcher

__all__ = [
    "MONITORS_FAILED_EXIT",
    "Change",
    "Duration",
    "ErrorRate",
    "FieldCoverage",
    "FinishReason",
    "ItemCount",
    "Monitor",
    "MonitorWatcher",
    "Result",
    "Retries",
    "RunView",
    "ValidationRate",
    "load_monitors",
    "monitoring_for",
]
