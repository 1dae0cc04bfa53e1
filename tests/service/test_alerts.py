"""The service's alerts through :mod:`eclaw.alerts` to a real local webhook receiver: a failed job
(``eclaw serve --alerts FILE``, a real service process) and a missed schedule slot (policy skip)."""

from __future__ import annotations

import time
from pathlib import Path

from eclaw.service.db import Database
from eclaw.service.jobs import JobManager
from eclaw.service.notify import Notifier
from eclaw.service.project import Project
from eclaw.service.schedules import Scheduler
from tests.service.helpers import Service, receiver, wait_for

FAILING = '''
from eclaw.flows import Flow

flow = Flow("boom")


@flow.task()
def boom(ctx):
    raise RuntimeError("no luck")
'''


def alerts_file(folder: Path, url: str) -> Path:
    path = folder / "alerts.toml"
    path.write_text(f'[alerts]\nretries = 0\n[[alerts.channel]]\ntype = "webhook"\nurl = "{url}"\n')
    return path


def test_a_failed_job_sends_one_job_failed_alert(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "boom_flow.py").write_text(FAILING)
    with receiver() as (url, got):
        service = Service(project, "--alerts", str(alerts_file(tmp_path, url))).start()
        try:
            job = service.call("POST", "/api/jobs", {"flow": "boom_flow.py"})[1]
            wait_for(lambda: got, 60, "the alert")
            assert service.call("GET", f"/api/jobs/{job['id']}")[1]["state"] == "failed"
        finally:
            service.stop()
    assert [(a["kind"], a["title"], a["fields"]) for a in got] == [
        ("job_failed", f"job {job['id']} failed", {"job": str(job["id"])})
    ]
    assert "exit code 1" in got[0]["text"]


async def test_a_missed_slot_sends_schedule_missed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "boom_flow.py").write_text(FAILING)
    db = Database(project / ".eclaw-serve" / "service.db")
    with receiver() as (url, got):
        notifier = Notifier(str(alerts_file(tmp_path, url)))
        scheduler = Scheduler(db, JobManager(db, Project(project)), notifier)
        schedule = scheduler.add({"spider": "flow:boom_flow.py", "cron": "0 * * * *", "missed": "skip"})
        now = time.time() // 3600 * 3600 - 1800  # half past an hour: no slot is within the last minute
        db.update_schedule(schedule["id"], last_slot=now - 3 * 3600)  # the service was down 3 h
        scheduler.tick(now)
        await notifier.close()
    db.close()
    assert [a["kind"] for a in got] == ["schedule_missed"]
    assert got[0]["fields"]["schedule"] == str(schedule["id"]) and got[0]["fields"]["missed"] == "3"
    assert not db_jobs(project)  # skipped, not run


def db_jobs(project: Path) -> list[dict]:
    db = Database(project / ".eclaw-serve" / "service.db")
    try:
        return db.jobs()
    finally:
        db.close()
