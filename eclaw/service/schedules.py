"""Cron schedules (croniter, with an IANA time zone from zoneinfo; 5 fields, or 6 with seconds last).

Every second the scheduler finds each schedule's due slots since its ``last_slot``. A slot fires at
most once: its ``(schedule, slot)`` row is inserted in SQLite before its job is queued. A slot more
than ``late`` seconds old (the service was down) is *missed*: policy ``skip`` alerts and skips it,
``catchup`` runs the missed slots too (at most :data:`MAX_CATCHUP` per schedule, newest first kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from eclaw.exceptions import ConfigError, EclawError
from eclaw.security.redact import is_secret_arg
from eclaw.service.db import Store
from eclaw.service.flowjobs import flow_file, load_graph
from eclaw.service.jobs import JobManager
from eclaw.service.notify import Notifier
from eclaw.service.project import validate_args

__all__ = ["MAX_CATCHUP", "POLICIES", "Scheduler", "check_cron"]

logger = logging.getLogger(__name__)

POLICIES = ("skip", "catchup")
MAX_CATCHUP = 10
_MAX_SLOTS_SCANNED = 10_000


def check_cron(cron: str, timezone: str) -> ZoneInfo:
    """Validate a cron expression and a time zone; a one-line ConfigError naming the bad one."""
    if not isinstance(cron, str) or not croniter.is_valid(cron) or len(cron.split()) not in (5, 6):
        raise ConfigError(f"bad cron expression {cron!r} (5 fields, or 6 with seconds last)")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigError(f"unknown time zone {timezone!r} (an IANA name such as Europe/Paris)") from None


def due_slots(cron: str, zone: ZoneInfo, after: float, now: float) -> list[float]:
    """The slots of ``cron`` in ``(after, now]`` (epoch seconds), oldest first, at most the newest 10,000."""
    it = croniter(cron, datetime.fromtimestamp(after, zone))
    slots: list[float] = []
    while True:
        slot = float(it.get_next(float))
        if slot > now:
            return slots
        slots.append(slot)
        if len(slots) > _MAX_SLOTS_SCANNED:
            del slots[0]


class Scheduler:
    """Fires the project's schedules as jobs of a :class:`JobManager`."""

    def __init__(self, db: Store, jobs: JobManager, notifier: Notifier, *, late: float = 60.0) -> None:
        self.db, self.jobs, self.notifier, self.late = db, jobs, notifier, late

    def add(self, data: Any) -> dict[str, Any]:
        """Validate and store a schedule from an API body (``spider``, ``cron``, ``timezone``, ``args``, ``missed``)."""
        spider, cron, timezone, missed, args = self._fields(data)
        schedule_id = self.db.add_schedule(spider, args, cron, timezone, missed)
        return self.view(schedule_id) or {}

    def update(self, schedule_id: int, data: Any) -> dict[str, Any] | None:
        """Change a schedule (same fields as :meth:`add`, plus ``enabled``); None if there is none."""
        current = self.db.schedule(schedule_id)
        if current is None:
            return None
        if not isinstance(data, dict):
            raise ConfigError("body: must be a JSON object")
        merged = {**current, **data}
        spider, cron, timezone, missed, args = self._fields(merged)
        enabled = merged.get("enabled", True)
        if not isinstance(enabled, bool | int):
            raise ConfigError("enabled: must be true or false")
        self.db.update_schedule(schedule_id, spider=spider, cron=cron, timezone=timezone, missed=missed,
                                args=json.dumps(args), enabled=int(bool(enabled)))  # fmt: skip
        return self.view(schedule_id)

    def view(self, schedule_id: int) -> dict[str, Any] | None:
        """A schedule with its next slot (ISO time in its zone) and fired slot count."""
        record = self.db.schedule(schedule_id)
        if record is None:
            return None
        zone = ZoneInfo(record["timezone"])
        upcoming = croniter(record["cron"], datetime.fromtimestamp(max(time.time(), record["last_slot"]), zone))
        record["enabled"] = bool(record["enabled"])
        record["next_slot"] = upcoming.get_next(datetime).isoformat()
        record["fired"] = len(self.db.slots(schedule_id))
        return record

    async def run(self, interval: float = 1.0) -> None:
        """Fire due slots every ``interval`` seconds (until cancelled)."""
        while True:
            try:
                self.tick()
            except ConnectionError as exc:  # the store is down: the slots are fired when it is back
                logger.warning("schedules: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.sleep(interval - time.time() % interval)

    def tick(self, now: float | None = None) -> None:
        """Fire every due slot of every enabled schedule."""
        now = time.time() if now is None else now
        for record in self.db.schedules():
            if record["enabled"]:
                self._fire_due(record, now)

    def _fire_due(self, record: dict[str, Any], now: float) -> None:
        slots = due_slots(record["cron"], ZoneInfo(record["timezone"]), record["last_slot"], now)
        if not slots:
            return
        missed = [slot for slot in slots if now - slot > self.late]
        fire = [slot for slot in slots if now - slot <= self.late]
        if missed and record["missed"] == "catchup":
            fire = slots[-MAX_CATCHUP:]
            missed = slots[: -MAX_CATCHUP] if len(slots) > MAX_CATCHUP else []
        if missed:
            self.notifier.notify("schedule_missed", f"schedule {record['id']} missed {len(missed)} slot(s)",
                                 f"{record['spider']}: slots from {_iso(missed[0])} to {_iso(missed[-1])} skipped",
                                 schedule=record["id"], missed=len(missed))  # fmt: skip
        self.db.update_schedule(record["id"], last_slot=slots[-1])
        for slot in fire:
            if not self.db.claim_slot(record["id"], slot):
                continue
            try:
                job = self.jobs.submit(record["spider"], record["args"], schedule_id=record["id"])
            except EclawError as exc:
                self.notifier.notify("schedule_failed", f"schedule {record['id']} could not start", str(exc),
                                     schedule=record["id"])  # fmt: skip
                continue
            self.db.set_slot_job(record["id"], slot, job["id"])

    def _fields(self, data: Any) -> tuple[str, str, str, str, dict[str, str]]:
        if not isinstance(data, dict):
            raise ConfigError("body: must be a JSON object")
        spider, cron = data.get("spider"), data.get("cron")
        timezone, missed = data.get("timezone") or "UTC", data.get("missed") or "skip"
        if not isinstance(spider, str):
            raise ConfigError("spider: required (a spider name or FILE.py:Class)")
        if not isinstance(cron, str) or not isinstance(timezone, str):
            raise ConfigError("cron and timezone: must be strings")
        check_cron(cron, timezone)
        if missed not in POLICIES:
            raise ConfigError(f"missed: must be one of {', '.join(POLICIES)}")
        missed = str(missed)
        args = validate_args(data.get("args"))
        flow = flow_file(spider)
        if flow is not None:
            load_graph(self.jobs.project.check_file(flow, "flow file"))
        ref = None if flow is not None else self.jobs.project.resolve(spider)
        if any(is_secret_arg(arg, ref.secret_args if ref else ()) for arg in args):
            raise ConfigError("args: schedules cannot hold secret arguments (set them in the spider's settings)")
        return (ref.spec if ref else spider), cron, timezone, missed, args


def _iso(slot: float) -> str:
    return datetime.fromtimestamp(slot).astimezone().isoformat(timespec="seconds")
