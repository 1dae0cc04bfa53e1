"""Flow jobs of ``eclaw serve``: a two-task flow (a spider, then a function) against a local site,
each task's state read while it runs; a bad flow file is a 400; a flow job can be scheduled. And a
spider job's monitor results (a failed monitor: exit 3) in its record and on its page."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

from tests.service.forked_service import ForkedService
from tests.service.helpers import FLOW, SPIDERS, Service, site, wait_for

FAILING = '''
from eclaw.flows import Flow

flow = Flow("boom")


@flow.task()
def boom(ctx):
    raise RuntimeError("no luck")


@flow.task(depends_on=["boom"])
def after(ctx):
    return 1
'''


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with site(delay=0.3) as url:
        yield url


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    project = tmp_path_factory.mktemp("flows")
    (project / "pages_flow.py").write_text(FLOW)
    (project / "failing_flow.py").write_text(FAILING)
    service = ForkedService(project).start()
    yield service
    service.drain()
    service.stop()


def states(service: Service, job_id: int) -> dict[str, str]:
    record = service.call("GET", f"/api/jobs/{job_id}")[1]
    return {task["name"]: task["state"] for task in record["tasks"]}


def finished(service: Service, job_id: int) -> dict | None:
    record = service.call("GET", f"/api/jobs/{job_id}")[1]
    return record if record["state"] in ("finished", "failed") else None


def test_flow_job_tasks_go_pending_running_succeeded(service: Service, base: str) -> None:
    status, job = service.call("POST", "/api/jobs", {"flow": "pages_flow.py", "args": {"base": base}})
    assert status == 201 and job["spider"] == "flow:pages_flow.py"
    assert [(t["name"], t["after"]) for t in job["tasks"]] == [("pages", []), ("count", ["pages"])]
    wait_for(lambda: states(service, job["id"]) == {"pages": "running", "count": "pending"}, 60, "pages running")
    record = wait_for(lambda: finished(service, job["id"]), 60, "the flow job")
    assert record["state"] == "finished" and record["returncode"] == 0, record
    assert states(service, job["id"]) == {"pages": "succeeded", "count": "succeeded"}


def test_failed_task_fails_the_job_and_skips_what_follows(service: Service) -> None:
    job = service.call("POST", "/api/jobs", {"flow": "failing_flow.py"})[1]
    record = wait_for(lambda: finished(service, job["id"]), 60, "the flow job")
    assert record["state"] == "failed" and record["returncode"] == 1
    assert states(service, job["id"]) == {"boom": "failed", "after": "skipped"}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"flow": "missing.py"}, "flow file not found"),
        ({"flow": "../x.py"}, "flow file not found"),
        ({"flow": "pages_flow.py", "monitors": "m.toml"}, "monitors: only for spider jobs"),
    ],
)
def test_bad_flow_job_is_a_400(service: Service, body: dict, reason: str) -> None:
    status, answer = service.call("POST", "/api/jobs", body)
    assert status == 400 and reason in answer["error"]


def test_flow_job_can_be_scheduled(service: Service) -> None:
    status, schedule = service.call("POST", "/api/schedules", {"spider": "flow:failing_flow.py", "cron": "* * * * * *"})
    assert status == 201
    wait_for(lambda: service.call("GET", f"/api/schedules/{schedule['id']}")[1]["fired"], 30, "a slot")
    service.call("DELETE", f"/api/schedules/{schedule['id']}")
    jobs = service.call("GET", "/api/jobs?limit=1000")[1]["jobs"]
    assert any(j["spider"] == "flow:failing_flow.py" and j["schedule_id"] == schedule["id"] for j in jobs)


def test_monitors_results_and_a_failed_monitor_in_the_job_record(service: Service, base: str) -> None:
    (service.project / "spiders.py").write_text(SPIDERS)
    (service.project / "monitors.toml").write_text("[monitors]\nitems = { min = 100 }\n")
    args = {"start_urls": f"{base}/?count=2"}
    job = service.call("POST", "/api/jobs", {"spider": "slow", "args": args, "monitors": "monitors.toml"})[1]
    record = wait_for(lambda: finished(service, job["id"]), 60, "the job")
    assert record["returncode"] == 3 and record["reason"] == "monitor(s) failed: item_count", record
    assert [(r["name"], r["ok"]) for r in record["monitor_results"]] == [("item_count", False)]
    with urllib.request.urlopen(f"{service.url}/jobs/{job['id']}", timeout=10) as page:
        html = page.read().decode()
    assert "<h2>Monitors</h2>" in html and "item_count" in html and "FAILED" in html
