"""The service's store: one contract, run against both stores (SQLite, a real PostgreSQL from
tests/outputs/postgres_server.py), then ``eclaw serve --store postgresql://…`` end to end (a real service
process running a real crawl of a local site, its records in PostgreSQL)."""

from __future__ import annotations

import asyncio
import itertools
import json
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eclaw.exceptions import ConfigError
from eclaw.service.db import Store, open_store
from eclaw.service.jobs import JobManager
from eclaw.service.project import Project
from eclaw.service.schedules import Scheduler
from tests.inprocess import eclaw_inprocess
from tests.outputs.postgres_server import PASSWORD, PostgresServer, free_port, postgres_server
from tests.service.forked_service import ForkedService
from tests.service.helpers import Service, site, wait_for, write_project

DOCS = Path(__file__).resolve().parents[2] / "docs"
_schemas = itertools.count(1)


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    directory = Path(tempfile.mkdtemp(prefix="eclaw-pg-"))  # not under pytest's 0700 tmp: the postgres user reads it
    try:
        with postgres_server(directory) as server:
            yield server
    finally:
        subprocess.run(["rm", "-rf", str(directory)], check=False)


@pytest.fixture(params=["sqlite", "postgresql"])
def uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store of each kind, new for the test: a SQLite file, a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        return str(tmp_path / "service.db")
    server: PostgresServer = request.getfixturevalue("pg")
    return f"{server.url()}?schema=contract_{next(_schemas)}"


@pytest.fixture
def store(uri: str, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(uri, tmp_path)
    yield opened
    opened.close()


# -- the contract --------------------------------------------------------------------------------


def test_jobs_round_trip(store: Store) -> None:
    job_id = store.add_job("spiders.py:Slow", {"start_urls": "http://x/", "pin": "***"}, "checks.toml")
    job = store.job(job_id)
    assert job is not None and isinstance(job["id"], int) and isinstance(job["created"], float)
    assert {k: job[k] for k in ("spider", "args", "monitors", "schedule_id", "state", "pid", "finished")} == {
        "spider": "spiders.py:Slow", "args": {"start_urls": "http://x/", "pin": "***"}, "monitors": "checks.toml",
        "schedule_id": None, "state": "queued", "pid": None, "finished": None,
    }  # fmt: skip
    store.update_job(job_id, state="running", pid=4242, started=1.5)
    job = store.job(job_id)
    assert job is not None and (job["state"], job["pid"], job["started"]) == ("running", 4242, 1.5)
    with pytest.raises(ValueError, match="unknown job fields: \\['color'\\]"):
        store.update_job(job_id, color="red")
    assert store.job(job_id + 1000) is None


def test_jobs_order_filter_queue_and_delete(store: Store) -> None:
    ids = [store.add_job(f"s{i}", {}, None, schedule_id=7 if i == 2 else None) for i in range(4)]
    store.update_job(ids[1], state="running")
    store.update_job(ids[3], state="finished", returncode=0)
    assert [j["id"] for j in store.jobs()] == ids[::-1]
    assert [j["id"] for j in store.jobs(limit=2)] == ids[:1:-1]
    assert [j["id"] for j in store.jobs(states=("running", "finished"))] == [ids[3], ids[1]]
    assert [j["id"] for j in store.queued()] == [ids[0], ids[2]]
    assert store.queued()[1]["schedule_id"] == 7
    store.delete_job(ids[0])
    assert store.job(ids[0]) is None and [j["id"] for j in store.queued()] == [ids[2]]


def test_schedules_round_trip(store: Store) -> None:
    first = store.add_schedule("slow", {"a": "1"}, "*/5 * * * *", "Europe/Paris", "catchup")
    second = store.add_schedule("slow", {}, "0 * * * *", "UTC", "skip")
    record = store.schedule(first)
    assert record is not None and record["last_slot"] == record["created"]
    assert (record["args"], record["cron"], record["timezone"], record["missed"], record["enabled"]) == (
        {"a": "1"}, "*/5 * * * *", "Europe/Paris", "catchup", 1,
    )  # fmt: skip
    store.update_schedule(first, args=json.dumps({"b": "2"}), enabled=0, last_slot=60.0)
    record = store.schedule(first)
    assert record is not None and (record["args"], record["enabled"], record["last_slot"]) == ({"b": "2"}, 0, 60.0)
    with pytest.raises(ValueError, match="unknown schedule fields"):
        store.update_schedule(first, code="import os")
    assert [s["id"] for s in store.schedules()] == [first, second]
    assert store.delete_schedule(first) is True and store.delete_schedule(first) is False
    assert store.schedule(first) is None and [s["id"] for s in store.schedules()] == [second]


def test_a_slot_is_claimed_once(store: Store) -> None:
    schedule = store.add_schedule("slow", {}, "* * * * *", "UTC", "skip")
    slot = 1_796_400_000.0
    assert store.claim_slot(schedule, slot) is True
    assert store.claim_slot(schedule, slot) is False
    assert store.claim_slot(schedule, slot + 60) is True
    assert store.claim_slot(schedule + 1, slot) is True  # another schedule's slot
    store.set_slot_job(schedule, slot, 12)
    assert store.slots(schedule) == [(slot, 12), (slot + 60, None)]


def test_two_services_racing_claim_each_slot_once(uri: str, tmp_path: Path) -> None:
    """Two connections (two service processes on one store) claim the same slots at once."""
    stores = [open_store(uri, tmp_path) for _ in range(2)]
    schedule = stores[0].add_schedule("slow", {}, "* * * * *", "UTC", "skip")
    won: list[list[float]] = [[], []]
    start = threading.Barrier(2)

    def claim(index: int) -> None:
        start.wait(10)
        won[index] = [slot for slot in range(200) if stores[index].claim_slot(schedule, float(slot))]

    threads = [threading.Thread(target=claim, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert sorted(won[0] + won[1]) == [float(slot) for slot in range(200)]
        assert len(stores[1].slots(schedule)) == 200
    finally:
        for opened in stores:
            opened.close()


def test_a_restarted_service_finds_its_running_jobs(uri: str, tmp_path: Path) -> None:
    before = open_store(uri, tmp_path)
    running = before.add_job("slow", {}, None)
    before.update_job(running, state="running", pid=777)
    schedule = before.add_schedule("slow", {}, "* * * * *", "UTC", "skip")
    before.claim_slot(schedule, 60.0)
    before.close()
    after = open_store(uri, tmp_path)
    try:
        assert [(j["id"], j["pid"]) for j in after.jobs(states=("running", "cancelling"))] == [(running, 777)]
        assert after.claim_slot(schedule, 60.0) is False  # fired before the restart: never again
    finally:
        after.close()


# -- PostgreSQL only ---------------------------------------------------------------------------


def test_a_schema_belongs_to_one_project(pg: PostgresServer, tmp_path: Path) -> None:
    uri = f"{pg.url()}?schema=owned"
    open_store(uri, tmp_path / "a").close()
    open_store(uri.replace("postgresql://", "postgres://"), tmp_path / "a").close()  # the same project again
    with pytest.raises(ConfigError, match=r"schema owned holds the jobs of the project .*/a; give this one its own"):
        open_store(uri, tmp_path / "b")


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda pg: pg.url(password="wrong-pw"), 'password authentication failed for user "eclaw"'),
        (lambda pg: pg.url("nodb"), 'database "nodb" does not exist'),
        (lambda pg: pg.url(port=free_port()), "Connection refused"),
        (lambda pg: pg.url() + "?schema=no-dash", "bad schema name 'no-dash'"),
        (lambda pg: pg.url().replace(str(pg.port), "x1"), "Port could not be cast to integer value as 'x1'"),
        (lambda pg: "mysql://eclaw:" + PASSWORD + "@127.0.0.1/eclaw", "unknown scheme 'mysql'"),
    ],
)
def test_a_bad_store_is_one_line_without_the_password(
    pg: PostgresServer, tmp_path: Path, make: Any, reason: str
) -> None:
    uri = make(pg)
    with pytest.raises(ConfigError) as caught:
        open_store(uri, tmp_path)
    message = str(caught.value)
    assert reason in message and "\n" not in message
    assert PASSWORD not in message and "wrong-pw" not in message and message.startswith("--store ")
    assert "://eclaw:***@" in message


def test_the_store_reconnects_after_a_server_restart(pg: PostgresServer, tmp_path: Path) -> None:
    store = open_store(f"{pg.url()}?schema=restarts", tmp_path)
    try:
        job = store.add_job("slow", {}, None)
        pg.stop()
        with pytest.raises(ConnectionError) as caught:  # the server away: one line, no password
            store.job(job)
        assert "restarts" in str(caught.value) and PASSWORD not in str(caught.value)
        pg.start()
        wait_for(pg.running, 30, "the server")
        record = store.job(job)
        assert record is not None and record["state"] == "queued"
    finally:
        if not pg.running():
            pg.start()
        store.close()


async def test_the_service_loops_outlive_an_outage_of_the_store(
    pg: PostgresServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The job queue and the schedules log a warning while the server is away, and go on after."""
    store = open_store(f"{pg.url()}?schema=outage", tmp_path)
    jobs = JobManager(store, Project(tmp_path))  # no job runs here: the queue is empty
    loops = [asyncio.create_task(jobs.run()), asyncio.create_task(Scheduler(store, jobs, None).run(0.05))]  # type: ignore[arg-type]
    try:
        pg.stop()
        await async_wait(lambda: {"jobs", "schedules"} <= {r.getMessage().split(":")[0] for r in caplog.records})
        assert not any(loop.done() for loop in loops)
        pg.start()
        wait_for(pg.running, 30, "the server")
        seen = len(caplog.records)
        schedule = store.add_schedule("shop", {}, "* * * * *", "UTC", "skip")
        await async_wait(lambda: store.schedule(schedule) is not None)
        assert not any(loop.done() for loop in loops)
        assert all(PASSWORD not in r.getMessage() for r in caplog.records[:seen])
    finally:
        for loop in loops:
            loop.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        if not pg.running():
            pg.start()
        store.close()


async def async_wait(condition: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


# -- eclaw serve --store postgresql://… --------------------------------------------------------


def _doc_lines() -> list[tuple[str, str | None]]:
    """The ``$ eclaw serve … --store`` lines of docs/operations.md, each with the error line it shows."""
    lines = (DOCS / "operations.md").read_text().splitlines()
    return [(line[2:], lines[i + 1] if lines[i + 1].startswith("eclaw: error:") else None)
            for i, line in enumerate(lines) if line.startswith("$ eclaw serve ") and "--store" in line]  # fmt: skip


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with site(delay=0.05) as url:
        yield url


@pytest.fixture(scope="module")
def served(pg: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, str]]:
    """``eclaw serve`` run as the docs' example runs it, its store URI pointed at the test's server;
    yields the service and its schema."""
    line = next(line for line, error in _doc_lines() if not error)
    argv = shlex.split(line)
    assert argv[:4] == ["eclaw", "serve", "--project", "myproject"] and argv[4] == "--store" and len(argv) == 6
    options = dict(part.split("=", 1) for part in argv[5].partition("?")[2].split("&"))
    assert set(options) == {"schema", "passfile"}  # the password file is the docs' advice; here: in the URI
    service = ForkedService(write_project(tmp_path_factory.mktemp("served") / "myproject"), "--store",
                      f"{pg.url()}?schema={options['schema']}").start()  # fmt: skip
    yield service, options["schema"]
    service.drain()
    service.stop()


def _job(service: Service, job_id: int) -> dict[str, Any]:
    return service.call("GET", f"/api/jobs/{job_id}")[1]


def test_serve_runs_a_job_with_its_records_in_postgres(served: tuple[Service, str], pg: PostgresServer,
                                                       base: str) -> None:  # fmt: skip
    service, schema = served
    body = {"spider": "slow", "args": {"start_urls": f"{base}/?count=5", "pin": "s3cret-pin-4711"}}
    status, started = service.call("POST", "/api/jobs", body)
    assert status == 201
    job = wait_for(lambda: (j := _job(service, started["id"]))["state"] not in ("queued", "running") and j, 60, "job")
    assert (job["state"], job["returncode"], job["items"], job["args"]["pin"]) == ("finished", 0, 5, "***")
    rows = pg.sql(f"SELECT id, state, args::text FROM {schema}.jobs WHERE id = {started['id']}", "eclaw")
    assert [(r[0], r[1]) for r in rows] == [(started["id"], "finished")] and '"pin": "***"' in str(rows[0][2])
    everything = pg.sql(f"SELECT * FROM {schema}.jobs", "eclaw") + pg.sql(f"SELECT * FROM {schema}.meta", "eclaw")
    assert "s3cret-pin-4711" not in json.dumps(everything, default=str)  # the secret argument never stored
    assert not (service.project / ".eclaw-serve" / "service.db").exists()  # nothing in SQLite


def test_serve_kill_9_then_restart_adopts_the_running_job(served: tuple[Service, str], base: str) -> None:
    service, _ = served
    started = service.call("POST", "/api/jobs", {"spider": "slow", "args": {"start_urls": f"{base}/?count=5000"}})[1]
    wait_for(lambda: _job(service, started["id"])["items"] >= 2, 30, "items")
    pid = _job(service, started["id"])["pid"]
    service.stop(signal.SIGKILL)
    service.start()  # a new process reads PostgreSQL: the live crawl is adopted, not run twice
    adopted = _job(service, started["id"])
    assert (adopted["state"], adopted["pid"]) == ("running", pid)
    service.call("POST", f"/api/jobs/{started['id']}/cancel")
    stopped = wait_for(lambda: (j := _job(service, started["id"]))["state"] == "cancelled" and j, 30, "the cancel")
    assert stopped["pid"] == pid
    assert [j["id"] for j in service.call("GET", "/api/jobs")[1]["jobs"]].count(started["id"]) == 1


async def test_the_docs_failing_store_example(tmp_path: Path) -> None:
    """The docs' failing example, run as written (by the CLI's main, in this process: the test's working
    directory is ``tmp_path``): one line, exit 2, the password masked."""
    examples = [(line, error) for line, error in _doc_lines() if error]
    assert examples
    (tmp_path / "myproject").mkdir()
    for line, error in examples:
        argv = shlex.split(line)
        assert argv[0] == "eclaw", line
        code, _, stderr = await eclaw_inprocess(*argv[1:], wait=60)
        assert (code, stderr.strip()) == (2, error), line
