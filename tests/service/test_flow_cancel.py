"""Cancelling a running flow job: SIGINT stops the task it runs (a spider task: at once, gracefully);
a task that holds on past the grace period is killed; either way the tasks after it never start,
and the API shows the job ``cancelled`` and each task's state (``cancelled``, ``pending``)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.service.helpers import Service, site, wait_for

# a spider task crawling many slow pages, then a function that must never start
CRAWLING = '''
from eclaw import Spider
from eclaw.flows import Flow

flow = Flow("crawling")


@flow.task(spider_args=lambda ctx: {"start_urls": [ctx.params["base"] + "/?count=500"]})
class Pages(Spider):
    name = "pages"

    def parse(self, response):
        if "/slow/" in response.url:
            yield {"url": response.url}
        yield from response.follow_all(css="a")


@flow.task(depends_on=["pages"])
def count(ctx):
    return {"pages": len(ctx["pages"])}
'''
# a task that ignores the stop (a plain function in a thread: cancelling cannot interrupt it)
STUBBORN = '''
import time
from pathlib import Path

from eclaw.flows import Flow

flow = Flow("stubborn")


@flow.task()
def block(ctx):
    Path(ctx.params["mark"]).write_text("started")
    time.sleep(120)


@flow.task(depends_on=["block"])
def after(ctx):
    return 1
'''
GRACE = 4


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with site(delay=0.2) as url:
        yield url


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    project = tmp_path_factory.mktemp("flowcancel")
    (project / "crawling_flow.py").write_text(CRAWLING)
    (project / "stubborn_flow.py").write_text(STUBBORN)
    service = Service(project, "--grace", str(GRACE)).start()
    yield service
    service.drain()
    service.stop()


def record(service: Service, job_id: int) -> dict[str, Any]:
    return service.call("GET", f"/api/jobs/{job_id}")[1]


def states(job: dict[str, Any]) -> dict[str, str]:
    return {task["name"]: task["state"] for task in job["tasks"]}


def rows(service: Service, job_id: int) -> dict[str, str]:
    """The flow runner's own rows: the tasks that started."""
    store = service.project / ".eclaw-serve" / "jobs" / str(job_id) / "flows.sqlite"
    with contextlib.closing(sqlite3.connect(store)) as db:
        return dict(db.execute("SELECT task, state FROM flow_tasks WHERE run_key = ?", (f"job-{job_id}",)))


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def cancel(service: Service, job_id: int) -> dict[str, Any]:
    status, answer = service.call("POST", f"/api/jobs/{job_id}/cancel")
    assert status == 200 and answer["state"] == "cancelling"
    assert states(answer)[answer["tasks"][0]["name"]] == "running"  # until its process is gone
    return wait_for(lambda: (r := record(service, job_id))["state"] == "cancelled" and r, 30, "the cancel")


def test_cancel_stops_the_running_spider_task_and_starts_nothing_after(service: Service, base: str) -> None:
    job = service.call("POST", "/api/jobs", {"flow": "crawling_flow.py", "args": {"base": base}})[1]
    wait_for(lambda: states(record(service, job["id"]))["pages"] == "running", 60, "the spider task")
    items = service.project / ".eclaw-serve" / "jobs" / str(job["id"]) / "flows" / "crawling"
    wait_for(lambda: any(p.stat().st_size for p in items.rglob("pages.jsonl")), 30, "the task's first items")
    pid = record(service, job["id"])["pid"]
    done = cancel(service, job["id"])
    assert states(done) == {"pages": "cancelled", "count": "pending"}
    assert done["returncode"] == 130 and "cancelled" in done["reason"] and "killed" not in done["reason"]
    assert gone(pid) and rows(service, job["id"]) == {"pages": "running"}  # count never started
    listed = service.call("GET", "/api/jobs?state=cancelled")[1]["jobs"]
    assert [j["tasks"] for j in listed if j["id"] == job["id"]] == [done["tasks"]]
    with urllib.request.urlopen(f"{service.url}/jobs/{job['id']}", timeout=10) as page:  # its DAG in the UI
        html = page.read().decode()
    assert "task task-cancelled' data-task='pages'" in html and "task task-pending' data-task='count'" in html


def test_a_task_still_running_after_the_grace_is_killed(service: Service, tmp_path: Path) -> None:
    mark = tmp_path / "started"
    job = service.call("POST", "/api/jobs", {"flow": "stubborn_flow.py", "args": {"mark": str(mark)}})[1]
    wait_for(mark.exists, 60, "the blocking task")
    pid = record(service, job["id"])["pid"]
    done = cancel(service, job["id"])
    assert states(done) == {"block": "cancelled", "after": "pending"}
    assert done["returncode"] == -9 and done["reason"] == f"cancelled: still running {GRACE} s after SIGINT, killed"
    assert done["finished"] - done["started"] >= GRACE
    assert gone(pid) and rows(service, job["id"]) == {"block": "running"}
    with pytest.raises(ProcessLookupError):  # its whole process group: no thread or child left behind
        os.killpg(pid, 0)
