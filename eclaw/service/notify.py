"""The service's alerts ("job failed", "schedule missed"): the one place that talks to
:mod:`eclaw.alerts` when an alerts file is given (``eclaw serve --alerts FILE``); else a log line."""

from __future__ import annotations

import importlib
import logging
from typing import Any

__all__ = ["Notifier"]

log = logging.getLogger("eclaw.service")


class Notifier:
    """Sends the service's alerts; ``path`` is an alerts file of :mod:`eclaw.alerts` (or None: log only)."""

    def __init__(self, path: str | None = None) -> None:
        self._alerts: Any = None
        self._alerter: Any = None
        if path:
            self._alerts = importlib.import_module("eclaw.alerts")
            self._alerter = self._alerts.load_alerts(path)

    def notify(self, kind: str, title: str, text: str, **fields: Any) -> None:
        """Log the alert and hand it to the alerter (non-blocking)."""
        log.warning("%s: %s: %s", kind, title, text)
        if self._alerter is not None:
            shown = {name: str(value) for name, value in fields.items()}  # an Alert's fields are strings
            self._alerter.notify(self._alerts.Alert(kind, title, text, shown))

    async def close(self) -> None:
        """Drain the alerter."""
        if self._alerter is not None:
            await self._alerter.close()
