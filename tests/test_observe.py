"""Watching a crawl: JSON logs with request ids, one log handler per crawl, the event trace and a
retried URL's lifecycle, the HTML report, the Prometheus endpoint, and progress lines."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pty
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from lxml import html as lxml_html

from eclaw import ConfigError, Engine, Request, Response, Spider
from eclaw.events import FetcherChanged, RequestScheduled, ResponseDownloaded
from eclaw.middlewares import Retry
from eclaw.observe.progress import Progress, progress_line
from eclaw.observe.report import lifecycle, read_trace, render_report
from eclaw.observe.trace import Tracer
from eclaw.stats import Stats
from eclaw.testing import serve
from tests.conftest import assert_accounted, until
from tests.sites import FlakySite, fault_app

ROOT = Path(__file__).resolve().parent.parent


class Titles(Spider):
    name = "titles"

    def parse(self, response: Response) -> Any:
        yield {"url": response.url, "title": response.css("title::text").get()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def crawl(base: str, tmp: Path, tag: str = "", **settings: Any) -> Any:
    urls = [f"{base}/fail/a{tag}?times=1", f"{base}/ok/b", f"{base}/ok/c", f"{base}/fail/gone{tag}?times=9&status=404"]
    engine = Engine(middlewares=[Retry(2, base=0.01, cap=0.02)], overrides={"failures": "", **settings})
    async with engine:
        return await engine.crawl(Titles, start_urls=urls)


async def test_json_log_file_lines_carry_spider_run_and_request_ids_one_handler_per_crawl(
    tmp_path: Path, caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger="eclaw")  # the file gets what the logger's level lets through
    site = FlakySite()
    root = logging.getLogger("eclaw")
    before = list(root.handlers)
    async with serve(site.app()) as base:
        for run in ("one", "two"):
            stats = await crawl(base, tmp_path, run, log_file=str(tmp_path / f"{run}.jsonl"), log_format="json")
            assert_accounted(stats)
    assert root.handlers == before  # each crawl removed its handler
    lines = [json.loads(line) for line in (tmp_path / "two.jsonl").read_text().splitlines()]
    about = [line for line in lines if "retrying" in line["message"] or line["message"].startswith("failed")]
    assert len(about) == 2 and all(line["request_id"] > 0 and line["spider"] == "titles" for line in about)
    assert len({line["run_id"] for line in lines}) == 1  # only crawl two's lines in its file
    first = {json.loads(line)["run_id"] for line in (tmp_path / "one.jsonl").read_text().splitlines()}
    assert first and first.isdisjoint({lines[0]["run_id"]})


async def test_trace_shows_a_retried_urls_lifecycle_and_the_report_renders(tmp_path: Path) -> None:
    site = FlakySite()
    trace = tmp_path / "trace.jsonl"
    async with serve(site.app()) as base:
        stats = await crawl(base, tmp_path, trace=str(trace))
    records = read_trace(trace)
    assert {r["event"] for r in records} >= {"RequestGenerated", "RequestScheduled", "ResponseDownloaded"}
    story = lifecycle(records, url=f"{base}/fail/a?times=1")
    steps = [line.split()[1] for line in story.splitlines()[1:]]
    assert steps == [
        "RequestGenerated",
        "RequestScheduled",
        "RequestFailed",
        "RequestScheduled",
        "ResponseDownloaded",
        "ItemParsed",
        "ItemStored",  # a plain callback's items go through the pipelines before it counts as parsed
        "ResponseParsed",
    ], story
    assert "(will retry)" in story and "200," in story
    page = lxml_html.fromstring(render_report(records))
    assert [h.text for h in page.iter("h2")] == [
        "Throughput over time",
        "Status codes",
        "Download latency",
        "Failures by reason",
        "Failing domains",
        "Top failing URLs",
        "Requests dropped by reason",
        "Items stored by type",
    ]
    assert len(list(page.iter("svg"))) == 2  # the column charts; bar charts are HTML
    assert stats.requests_failed == 1 and "gone" in page.text_content()


async def test_trace_finds_a_redirected_request_by_its_final_url(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    async with serve(fault_app()) as base, Engine(overrides={"trace": str(trace)}) as engine:
        await engine.crawl(Titles, start_urls=[base + "/chain/2"])
    records = read_trace(trace)
    for url in (f"{base}/chain/2", f"{base}/chain/0", f"{base}/chain/0#end"):
        story = lifecycle(records, url=url)
        assert story.splitlines()[0] == f"request 1 {base}/chain/2", story
        assert "(download " in story and story.count(f"from {base}/chain/0") == 1, story


async def test_metrics_endpoint_is_scraped_during_a_crawl(tmp_path: Path) -> None:
    port = free_port()
    site = FlakySite()

    def scrape() -> str:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()

    async with serve(site.app()) as base:
        engine = Engine(overrides={"metrics_port": port, "failures": ""})
        urls = [f"{base}/stall/s{n}?times=1&s=1.5" for n in range(3)] + [f"{base}/ok/x"]
        async with engine:
            task = asyncio.create_task(engine.crawl(Titles, start_urls=urls))
            text = ""
            for _ in range(100):  # until the page that does not stall is in (the three others take 1.5 s)
                await asyncio.sleep(0.05)
                with contextlib.suppress(OSError):
                    text = await asyncio.to_thread(scrape)
                    if "eclaw_download_seconds_count 1.0" in text and "eclaw_in_flight 3.0" in text:
                        break
            await task
    assert 'eclaw_responses_total{status="200"}' in text
    assert "eclaw_in_flight 3.0" in text  # the three stalled downloads
    assert "eclaw_event_loop_lag_seconds" in text
    # one download ended (the page that did not stall), in well under the stalls' 1.5 s
    assert "eclaw_download_seconds_count 1.0" in text and 'eclaw_download_seconds_bucket{le="+Inf"} 1.0' in text
    assert (
        'eclaw_download_seconds_bucket{le="1.0"} 1.0' in text
        and float(text.split("eclaw_download_seconds_sum ")[1].split()[0]) < 1.0
    )
    try:
        await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1))
        raise AssertionError("the metrics server outlived its crawl")
    except OSError:
        pass


async def test_progress_log_lines_when_not_a_tty(caplog: Any) -> None:
    stats = Stats(spider="s", requests_parsed=40, items_stored=12, requests_failed=2)
    stats.failed_by_reason.update({"http 404": 2})
    progress = Progress(every=0.02)
    with caplog.at_level(logging.INFO, logger="eclaw.observe.progress"):
        task = asyncio.create_task(progress.run(lambda: (stats, 7, 3)))
        await until(lambda: any(r.name == "eclaw.observe.progress" for r in caplog.records))
        task.cancel()
    line = next(r.getMessage() for r in caplog.records if r.name == "eclaw.observe.progress")
    assert line.startswith("progress: 40 pages (") and "12 items, 7 queued, 3 in flight" in line
    assert "errors: http 404 2" in line
    assert progress_line(stats, 10, 0, 2.0).endswith("queue ETA 5s; errors: http 404 2")


def test_live_progress_on_a_terminal(tmp_path: Path) -> None:
    """The CLI in a pseudo-terminal draws the rich table; with --quiet it does not."""
    spider = tmp_path / "slow.py"
    spider.write_text(
        "import asyncio\nfrom eclaw import Spider\n"
        "class Slow(Spider):\n    name = 'slow'\n    start_urls = []\n"
        "    async def start_requests(self):\n        await asyncio.sleep(1.5)\n        return\n        yield\n"
    )
    for quiet, expected in ((False, True), (True, False)):
        main, child = pty.openpty()
        args = [sys.executable, "-m", "eclaw", "crawl", str(spider), "-s", "store="] + (["--quiet"] if quiet else [])
        process = subprocess.Popen(args, stdout=child, stderr=subprocess.DEVNULL, cwd=tmp_path)
        os.close(child)
        output = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        process.wait(30)
        os.close(main)
        assert (b"eclaw: slow" in output and b"queued / in flight" in output) is expected


async def test_a_metrics_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        engine = Engine(overrides={"metrics_port": port, "failures": ""})
        with pytest.raises(ConfigError, match=rf"^cannot serve metrics on port {port}: .*in use"):
            async with engine:
                await engine.crawl(Titles, start_urls=["http://127.0.0.1:1/"])


async def test_the_trace_holds_few_response_bodies_before_writing_their_lines(tmp_path: Path) -> None:
    """Lines are formatted a batch at a time; pending events hold their responses, so a few large
    pages write the batch at once rather than wait for 64 events."""
    tracer = Tracer(str(tmp_path / "trace.jsonl"))
    await tracer.open(None)  # type: ignore[arg-type]
    request = Request("http://big.test/a.pdf")
    small = Response("http://big.test/a.pdf", status=200, body=b"%PDF-1.4 <html>", request=request)
    tracer.record(ResponseDownloaded(request=request, response=small))
    assert len(tracer._pending) == 1  # waits for its batch
    large = Response("http://big.test/a.pdf", status=200, body=b"\0" * Tracer.HELD, request=request)
    tracer.record(ResponseDownloaded(request=request, response=large))
    assert tracer._pending == []  # written at once: the large body is not held
    await tracer.close()
    records = read_trace(tmp_path / "trace.jsonl")
    assert [r["bytes"] for r in records] == [15, Tracer.HELD]


async def test_a_line_the_trace_cannot_format_loses_that_line_only(tmp_path: Path) -> None:
    tracer = Tracer(str(tmp_path / "trace.jsonl"))
    await tracer.open(None)  # type: ignore[arg-type]
    request = Request("http://odd.test/")
    tracer.record(RequestScheduled(request=request))
    tracer.record(FetcherChanged(host="odd.test", previous="plain", fetcher=object(), reason="test"))  # type: ignore[arg-type]
    tracer.record(RequestScheduled(request=request))
    with pytest.raises(TypeError, match="not JSON serializable"):
        await tracer.close()
    assert [r["event"] for r in read_trace(tmp_path / "trace.jsonl")] == ["RequestScheduled", "RequestScheduled"]
