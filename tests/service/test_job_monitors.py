"""Each job's monitor results are its own: two jobs of one spider with the same monitors file, held
running at the same time by the site, each get their results in their own directory and record
(and the spider's shared results file is not written); a spider's own monitors count too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from eclaw.testing import serve
from tests.service.forked_service import ForkedService
from tests.service.helpers import Service, wait_for

SPIDERS = '''
from eclaw import Spider
from eclaw.monitors import ItemCount


class Shop(Spider):
    name = "shop"

    def parse(self, response):
        if "/item/" in response.url:
            yield {"url": response.url}
        yield from response.follow_all(css="a")


class Checked(Shop):
    name = "checked"
    monitors = [ItemCount(min=1, max=2)]
'''


class Barrier:
    """``/start?job=J&count=N`` links N item pages, each held until two jobs have asked for one."""

    def __init__(self) -> None:
        self.jobs: set[str] = set()
        self.both = asyncio.Event()

    async def start(self, request: web.Request) -> web.Response:
        job, count = request.query["job"], int(request.query["count"])
        links = "".join(f"<a href='/item/{n}?job={job}'>{n}</a>" for n in range(count))
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    async def item(self, request: web.Request) -> web.Response:
        self.jobs.add(request.query["job"])
        if len(self.jobs) >= 2:
            self.both.set()
        await asyncio.wait_for(self.both.wait(), 60)
        return web.Response(text="<html><body>item</body></html>", content_type="text/html")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/start", self.start)
        app.router.add_get("/item/{n}", self.item)
        return app


@contextlib.contextmanager
def barrier_site() -> Iterator[str]:
    ready: list[str] = []
    stop = threading.Event()

    async def main() -> None:
        async with serve(Barrier().app()) as base:
            ready.append(base)
            await asyncio.to_thread(stop.wait)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    wait_for(lambda: ready, 10, "the site")
    try:
        yield ready[0]
    finally:
        stop.set()
        thread.join(10)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    project = tmp_path_factory.mktemp("shop")
    (project / "shop.py").write_text(SPIDERS)
    (project / "checks.toml").write_text("[monitors]\nitems = { min = 4 }\n")
    service = ForkedService(project, "--max-jobs", "2").start()
    yield service
    service.drain()
    service.stop()


def finished(service: Service, job_id: int) -> dict[str, Any] | None:
    record = service.call("GET", f"/api/jobs/{job_id}")[1]
    return record if record["state"] in ("finished", "failed", "cancelled") else None


def results(record: dict[str, Any]) -> list[tuple[str, bool, Any]]:
    return [(r["name"], r["ok"], r["value"]) for r in record["monitor_results"]]


def test_two_jobs_at_once_each_have_their_own_monitor_results(service: Service) -> None:
    with barrier_site() as base:
        ids = {}
        for job, count in (("a", 3), ("b", 5)):  # min 4: a fails, b passes
            body = {"spider": "Shop", "args": {"start_urls": f"{base}/start?job={job}&count={count}"},
                    "monitors": "checks.toml"}  # fmt: skip
            ids[job] = service.call("POST", "/api/jobs", body)[1]["id"]
        a, b = (wait_for(lambda i=i: finished(service, i), 60, "the jobs") for i in (ids["a"], ids["b"]))
    failed = "monitor(s) failed: item_count"
    assert (a["returncode"], a["reason"], results(a)) == (3, failed, [("item_count", False, 3)])
    assert (b["returncode"], b["reason"], results(b)) == (0, None, [("item_count", True, 5)])
    assert "below the minimum 4" in a["monitor_results"][0]["message"]
    for job, record in (("a", a), ("b", b)):
        folder = service.project / ".eclaw-serve" / "jobs" / str(record["id"])
        saved = json.loads((folder / "monitors.json").read_text())
        assert saved["spider"] == "shop" and saved["ok"] is (job == "b")
        assert [(r["name"], r["value"]) for r in saved["results"]] == [("item_count", record["items"])]
    assert not (service.project / "eclaw-data" / "shop.monitors.json").exists()  # the shared default: unused


def test_a_spiders_own_monitors_are_in_its_job_record(service: Service) -> None:
    with barrier_site() as base:
        body = {"spider": "checked", "args": {"start_urls": f"{base}/start?job=c&count=3"}}
        first = service.call("POST", "/api/jobs", body)[1]
        assert "monitor_results" not in first  # no monitors file, no results yet
        other = {"spider": "Shop", "args": {"start_urls": f"{base}/start?job=d&count=1"}}  # releases the barrier
        second = service.call("POST", "/api/jobs", other)[1]
        record = wait_for(lambda: finished(service, first["id"]), 60, "the job")
        plain = wait_for(lambda: finished(service, second["id"]), 60, "the other job")
    assert record["returncode"] == 3 and results(record) == [("item_count", False, 3)]
    assert "monitor_results" not in plain  # no monitors at all
