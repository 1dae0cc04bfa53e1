"""Evidence for HTTP failures: a 404, or a 503 still failing after its retries, leaves a snapshot
of the server's answer (its headers, the start of its body) named by the failure's log line and
its line in the failures file; the stats count those responses.

Against a local help-desk API whose tickets are gone (404, a big HTML page) or under maintenance
(503 with a JSON body and ``Retry-After: 0``), every request carrying an ``Authorization`` token.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import Request, Response, Settings, Spider
from eclaw.observe.snapshots import HTTP_ERROR_BODY_MAX, load_snapshot
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, read_jsonl, record_file
from tests.test_cli import eclaw

TOKEN = "hd-7f3a9c0e5b21d4"  # the help desk's API token: never on disk
COOKIE = "sid=4b1d0c77e2aa"
GONE_PAGE = b"<html><title>Ticket 41 not found</title><h1>No such ticket</h1>" + b"<p>padding</p>" * 8000


class HelpDesk:
    """``/tickets/41``: 404 with a 112 KB page; ``/tickets/42``: 503 with a JSON body, every time."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.tokens: set[str | None] = set()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/tickets/41", self.gone)
        app.router.add_get("/tickets/42", self.down)
        return app

    def _seen(self, request: web.Request) -> None:
        self.hits[request.path] += 1
        self.tokens.add(request.headers.get("Authorization"))

    async def gone(self, request: web.Request) -> web.Response:
        self._seen(request)
        headers = {"X-Trace": "req-404-a1", "Set-Cookie": COOKIE}
        return web.Response(status=404, body=GONE_PAGE, content_type="text/html", headers=headers)

    async def down(self, request: web.Request) -> web.Response:
        self._seen(request)
        body = json.dumps({"error": "maintenance", "back": "02:00 UTC"})
        headers = {"X-Trace": "req-503-b2", "Retry-After": "0"}
        return web.Response(status=503, text=body, content_type="application/json", headers=headers)


class Tickets(Spider):
    name = "tickets"
    base_url = ""

    def start_requests(self) -> Any:
        for ticket in (41, 42):
            yield Request(f"{self.base_url}/tickets/{ticket}", headers={"Authorization": f"Bearer {TOKEN}"})

    def parse(self, response: Response) -> Any:
        yield response.json()


async def crawl(settings: Settings) -> tuple[HelpDesk, str, Any]:
    desk = HelpDesk()
    async with serve(desk.app()) as base:
        items, stats = await collect(Tickets, settings=settings, base_url=base)
    assert items == [] and desk.tokens == {f"Bearer {TOKEN}"}  # every request carried the token
    assert desk.hits == {"/tickets/41": 1, "/tickets/42": 3}  # 404 once, 503 retried twice
    assert_accounted(stats)
    return desk, base, stats


def snapshot_folders() -> list[Path]:
    """The spider's snapshot folders, sorted ([] when there is no snapshots folder)."""
    root = Path("eclaw-data/tickets/snapshots")
    return sorted(root.iterdir()) if root.exists() else []


def failed_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("failed ")]


async def test_http_failures_keep_the_servers_answer_in_a_snapshot_the_failure_lines_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, base, stats = await crawl(Settings(store="", retries=2))
    assert stats.failed_by_reason == {"http 404": 1, "http 503": 1}
    failures = {f["reason"]: f for f in read_jsonl(record_file("tickets", "failures"))}
    gone, down = Path(failures["http 404"]["snapshot"]), Path(failures["http 503"]["snapshot"])
    assert snapshot_folders() == sorted([gone, down])
    lines = failed_lines(caplog)
    assert len(lines) == 2
    assert any(f"{base}/tickets/41" in line and line.endswith(f"; snapshot {gone}") for line in lines), lines
    assert any(f"{base}/tickets/42" in line and line.endswith(f"; snapshot {down}") for line in lines), lines
    assert failures["http 503"]["attempts"] == 3 and stats.counters["snapshots saved"] == 2

    # the 404: its page cut at 64 KiB, the size it had, the server's headers (its cookie masked)
    record = json.loads((gone / "snapshot.json").read_text())
    assert (gone / "body.html").read_bytes() == GONE_PAGE[:HTTP_ERROR_BODY_MAX] and HTTP_ERROR_BODY_MAX == 65536
    answer = record["response"]
    assert (answer["status"], answer["body_bytes"], answer["body_truncated"]) == (404, len(GONE_PAGE), True)
    assert ["X-Trace", "req-404-a1"] in answer["headers"] and ["Set-Cookie", "***"] in answer["headers"]
    assert record["reason"] == "http 404" and record["request"]["headers"]["Authorization"] == "***"
    assert load_snapshot(gone).css("h1::text").get() == "No such ticket"  # eclaw shell FOLDER opens it

    # the 503 after its retries: the whole (small) JSON body and the Retry-After the server sent
    record = json.loads((down / "snapshot.json").read_text())
    assert json.loads((down / "body.json").read_bytes()) == {"error": "maintenance", "back": "02:00 UTC"}
    assert (record["response"]["status"], record["response"]["body_truncated"]) == (503, False)
    assert ["Retry-After", "0"] in record["response"]["headers"]
    assert record["request"]["meta"]["retry_times"] == 2

    # the token the requests carried is in no file of either snapshot
    kept = b"".join(file.read_bytes() for folder in (gone, down) for file in sorted(folder.glob("*")))
    assert TOKEN.encode() not in kept and b"4b1d0c77e2aa" not in kept


async def test_responses_that_failed_on_their_status_are_counted() -> None:
    _, _, stats = await crawl(Settings(store="", snapshots="", retries=2))
    assert stats.responses_downloaded == 4 and stats.status_counts == {404: 1, 503: 3}
    assert stats.bytes_downloaded > len(GONE_PAGE)
    summary = stats.summary()
    assert re.search(r"^responses +4$", summary, re.M), summary
    assert re.search(r"^  status 503 +3$", summary, re.M), summary


async def test_snapshots_off_saves_none_and_the_failure_lines_say_nothing_of_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    await crawl(Settings(store="", snapshots="", retries=2))
    assert snapshot_folders() == []
    failures = read_jsonl(record_file("tickets", "failures"))
    assert len(failures) == 2 and all(f["snapshot"] is None for f in failures)
    lines = failed_lines(caplog)
    assert len(lines) == 2 and not any("snapshot" in line for line in lines)


SPIDER = textwrap.dedent(
    f"""
    from eclaw import Request, Spider

    class Tickets(Spider):
        name = "tickets"

        def start_requests(self):
            for ticket in (41, 42):
                yield Request(f"{{self.base_url}}/tickets/{{ticket}}", headers={{"Authorization": "Bearer {TOKEN}"}})
    """
)


async def test_the_cli_summary_counts_failed_responses_and_its_log_names_the_snapshots(tmp_path: Path) -> None:
    spider = tmp_path / "tickets.py"
    spider.write_text(SPIDER)
    desk = HelpDesk()
    async with serve(desk.app()) as base:
        code, stdout, stderr = await eclaw("crawl", str(spider), "-a", f"base_url={base}", "-s", "retries=1")
    assert code == 0, stderr
    assert re.search(r"^responses +3$", stdout, re.M) and re.search(r"^  status 404 +1$", stdout, re.M), stdout
    folders = snapshot_folders()
    assert len(folders) == 2
    for folder in folders:
        line = rf"failed {re.escape(base)}/tickets/4[12]: HTTP (404|503) for .*; snapshot {folder}$"
        assert re.search(line, stderr, re.M), stderr
    assert TOKEN not in stderr and TOKEN not in stdout
