"""``eclaw serve`` end to end: a real service process, real crawls of a local site; every API answer
is validated against the OpenAPI schema (tests/service/helpers.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.inprocess import eclaw_inprocess
from tests.service.forked_service import ForkedService
from tests.service.helpers import Service, site, wait_for, write_project


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with site(delay=0.1) as url:
        yield url


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    project = write_project(tmp_path_factory.mktemp("project"))
    service = ForkedService(project, "--max-jobs", "1").start()
    yield service
    service.drain()
    service.stop()


def job(service: Service, job_id: int) -> dict:
    return service.call("GET", f"/api/jobs/{job_id}")[1]


def done(service: Service, job_id: int) -> dict | None:
    record = job(service, job_id)
    return record if record["state"] in ("finished", "failed", "cancelled") else None


def test_health_spiders_and_schema(service: Service) -> None:
    assert service.call("GET", "/api/health")[1]["status"] == "ok"
    spiders = service.call("GET", "/api/spiders")[1]
    assert [s["spec"] for s in spiders["spiders"]] == ["spiders.py:Slow"]
    assert "broken.py" in spiders["errors"]
    assert "No module named 'nothing_of_that_name'" in spiders["errors"]["broken.py"]
    assert service.call("GET", "/api/openapi.json")[1]["openapi"] == "3.1.0"


def test_job_runs_to_the_end_with_items_logs_report(service: Service, base: str) -> None:
    status, started = service.call("POST", "/api/jobs", {"spider": "slow", "args": {"start_urls": f"{base}/?count=5"}})
    assert status == 201 and started["state"] in ("queued", "running")
    finished = wait_for(lambda: done(service, started["id"]), 60, "the job")
    assert finished["state"] == "finished" and finished["returncode"] == 0 and finished["items"] == 5
    items = service.call("GET", f"/api/jobs/{started['id']}/items?limit=2")[1]
    assert len(items["items"]) == 2 and items["total"] == 5
    assert service.call("GET", f"/api/jobs/{started['id']}/logs?lines=50")[1]["lines"]
    report = service.call("GET", f"/api/jobs/{started['id']}/report")[1]
    assert {"items.jsonl", "trace.jsonl", "output.log"} <= set(report["report"]["files"])
    assert started["id"] in [j["id"] for j in service.call("GET", "/api/jobs?state=finished")[1]["jobs"]]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"spider": "nope"}, "unknown spider 'nope'"),
        ({"spider": "broken.py"}, "No module named 'nothing_of_that_name'"),
        ({"spider": "../etc.py:X"}, "spider file must be in the project directory"),
        ({"spider": "slow", "args": {"a b": "1"}}, "bad argument name"),
        ({"spider": "slow", "code": "import os"}, "unknown field(s): code"),
        ({"spider": "slow", "monitors": "missing.toml"}, "monitors file not found"),
    ],
)
def test_bad_job_is_a_400_and_starts_nothing(service: Service, body: dict, reason: str) -> None:
    before = len(service.call("GET", "/api/jobs")[1]["jobs"])
    status, answer = service.call("POST", "/api/jobs", body)
    assert status == 400 and reason in answer["error"] and "\n" not in answer["error"]
    assert len(service.call("GET", "/api/jobs")[1]["jobs"]) == before
    assert service.call("GET", "/api/health")[0] == 200


def test_unknown_job_and_bad_id(service: Service) -> None:
    assert service.call("GET", "/api/jobs/99999")[0] == 404
    assert service.call("GET", "/api/jobs/x")[0] == 400


def test_queue_is_fifo_cancel_is_graceful_and_resume_continues(service: Service, base: str) -> None:
    args = {"start_urls": f"{base}/?count=400", "pin": "s3cr3t-pin", "api_token": "tok-123456"}
    first = service.call("POST", "/api/jobs", {"spider": "slow", "args": args})[1]
    second = service.call("POST", "/api/jobs", {"spider": "slow", "args": {"start_urls": f"{base}/?count=3"}})[1]
    assert first["args"]["pin"] == "***" and first["args"]["api_token"] == "***"
    wait_for(lambda: job(service, first["id"])["items"] >= 3, 30, "items of the first job")
    assert job(service, second["id"])["state"] == "queued"  # --max-jobs 1: it waits its turn
    assert service.call("POST", f"/api/jobs/{first['id']}/cancel")[1]["state"] in ("cancelling", "cancelled")
    cancelled = wait_for(lambda: done(service, first["id"]), 30, "the cancel")
    assert cancelled["state"] == "cancelled" and cancelled["returncode"] == 0  # SIGINT: paused, state saved
    wait_for(lambda: done(service, second["id"]), 60, "the queued job")
    logs = service.call("GET", f"/api/jobs/{first['id']}/logs?lines=10000")[1]["lines"]
    record = (service.project / ".eclaw-serve" / "service.db").read_bytes()
    assert b"s3cr3t-pin" not in record and not any("s3cr3t-pin" in line for line in logs)
    before = cancelled["items"]
    assert service.call("POST", f"/api/jobs/{first['id']}/resume")[1]["state"] == "queued"
    wait_for(lambda: job(service, first["id"])["items"] > before, 30, "the resumed job")
    service.call("POST", f"/api/jobs/{first['id']}/cancel")
    wait_for(lambda: done(service, first["id"]), 30, "the second cancel")


def test_schedule_fires_each_slot_once(service: Service, base: str) -> None:
    bad = {"spider": "slow", "cron": "* * * * * *", "timezone": "Mars/Olympus"}
    zone = "unknown time zone 'Mars/Olympus' (an IANA name such as Europe/Paris)"
    assert service.call("POST", "/api/schedules", bad) == (400, {"error": zone})
    bad_cron = {**bad, "cron": "61 * * * *", "timezone": "UTC"}
    assert "bad cron expression" in service.call("POST", "/api/schedules", bad_cron)[1]["error"]
    args = {"start_urls": f"{base}/?count=1"}
    body = {"spider": "slow", "cron": "* * * * * */2", "timezone": "Europe/Paris", "args": args}
    status, schedule = service.call("POST", "/api/schedules", body)
    assert status == 201 and schedule["missed"] == "skip"
    wait_for(lambda: service.call("GET", f"/api/schedules/{schedule['id']}")[1]["fired"] >= 2, 30, "two slots")
    assert service.call("PATCH", f"/api/schedules/{schedule['id']}", {"enabled": False})[1]["enabled"] is False
    fired = [j for j in service.call("GET", "/api/jobs?limit=1000")[1]["jobs"] if j["schedule_id"] == schedule["id"]]
    assert len(fired) == service.call("GET", f"/api/schedules/{schedule['id']}")[1]["fired"]
    assert service.call("DELETE", f"/api/schedules/{schedule['id']}")[1] == {"deleted": schedule["id"]}
    assert service.call("GET", f"/api/schedules/{schedule['id']}")[0] == 404
    for record in fired:
        wait_for(lambda record=record: done(service, record["id"]), 60, "the scheduled jobs")


async def test_not_local_host_needs_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ECLAW_SERVE_TOKEN", raising=False)
    code, _, stderr = await eclaw_inprocess("serve", "--project", str(tmp_path), "--host", "0.0.0.0", wait=30)
    assert code == 2
    assert stderr.strip() == "eclaw: error: --host 0.0.0.0 needs a token (--token or ECLAW_SERVE_TOKEN)"


def test_token_is_required_when_set(tmp_path: Path) -> None:
    service = ForkedService(write_project(tmp_path / "p"), token="t0ken-xyz").start()
    try:
        assert service.call("GET", "/api/jobs", auth=False)[0] == 401
        assert service.call("GET", "/api/jobs")[0] == 200
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(service.url + "/", timeout=10)
        caught.value.close()
        assert caught.value.code == 401  # the web UI too
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with opener.open(service.url + "/?token=t0ken-xyz", timeout=10) as page:  # sets the cookie, then "/"
            assert b"<h1>Jobs</h1>" in page.read()
    finally:
        service.drain()
        service.stop()


def test_kill_9_then_restart_adopts_the_live_job(tmp_path: Path, base: str) -> None:
    service = ForkedService(write_project(tmp_path / "p")).start()
    try:
        body = {"spider": "slow", "args": {"start_urls": f"{base}/?count=5000"}}
        started = service.call("POST", "/api/jobs", body)[1]
        wait_for(lambda: job(service, started["id"])["items"] >= 2, 30, "items")
        pid = job(service, started["id"])["pid"]
        service.stop(signal.SIGKILL)
        service.start()  # the crawl process outlived the service: adopted, not run twice
        adopted = job(service, started["id"])
        assert adopted["state"] == "running" and adopted["pid"] == pid
        before = adopted["items"]
        wait_for(lambda: job(service, started["id"])["items"] > before, 30, "the adopted crawl's progress")
        service.call("POST", f"/api/jobs/{started['id']}/cancel")  # an adopted job cancels like another
        stopped = wait_for(lambda: done(service, started["id"]), 30, "the cancel")
        assert stopped["state"] == "cancelled" and stopped["pid"] == pid
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)
        assert len(service.call("GET", "/api/jobs")[1]["jobs"]) == 1
    finally:
        service.drain()
        service.stop()


def test_restart_resumes_a_job_whose_process_is_gone(tmp_path: Path, base: str) -> None:
    service = ForkedService(write_project(tmp_path / "p")).start()
    try:
        body = {"spider": "slow", "args": {"start_urls": f"{base}/?count=120"}}
        started = service.call("POST", "/api/jobs", body)[1]
        wait_for(lambda: job(service, started["id"])["items"] >= 2, 30, "items")
        pid = job(service, started["id"])["pid"]
        service.stop(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):  # (if it ended on its own meanwhile: resumed all the same)
            os.killpg(pid, signal.SIGKILL)
        wait_for(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), 10, "the crawl's end")
        service.start()
        resumed = wait_for(lambda: done(service, started["id"]), 60, "the resumed job")
        assert resumed["state"] == "finished" and resumed["pid"] != pid
        assert resumed["items"] >= 120  # resumed from its state: items already written may be written again
    finally:
        service.drain()
        service.stop()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True




def test_retention_keeps_the_newest_jobs(tmp_path: Path, base: str) -> None:
    service = ForkedService(write_project(tmp_path / "p"), "--keep-jobs", "1").start()
    try:
        ids = []
        for _ in range(2):
            body = {"spider": "slow", "args": {"start_urls": f"{base}/?count=1"}}
            ids.append(service.call("POST", "/api/jobs", body)[1]["id"])
            wait_for(lambda: done(service, ids[-1]), 60, "the job")
        assert [j["id"] for j in service.call("GET", "/api/jobs")[1]["jobs"]] == [ids[1]]
        assert service.call("GET", f"/api/jobs/{ids[0]}")[0] == 404
        assert not (service.project / ".eclaw-serve" / "jobs" / str(ids[0])).exists()
    finally:
        service.drain()
        service.stop()
