"""Bad input at the edges (one line, exit 2) and the security basics."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import Engine, Request, Response, Spider
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, read_jsonl, record_file
from tests.test_cli import SPIDER, eclaw, write

NOT_CALLABLE = """
from eclaw import Request, Spider
class A(Spider):
    name = "a"
    def start_requests(self):
        yield Request("http://127.0.0.1:9/", callback="parse")
"""

WRONG_TYPE = SPIDER + '    custom_settings = {"retries": "many"}\n'


@pytest.mark.parametrize(
    ("source", "args", "message"),
    [
        (NOT_CALLABLE, [], "Request callback must be callable, got 'parse'"),
        (WRONG_TYPE, [], "spider 'a': setting 'retries' must be an integer"),
        (SPIDER, ["-s", "proxies=127.0.0.1:3128"], "bad proxy '127.0.0.1:3128': no scheme"),
        (SPIDER, ["-s", "proxies=ftp://u:pw@10.0.0.1:21"], "ftp proxies are not supported"),
        (SPIDER, ["-s", "store=/proc/no-such-dir/{spider}.sqlite"], "cannot open the store /proc/no-such-dir/a.sqlite"),
        (SPIDER, ["-s", "http_cache=/proc/no-such-dir"], "http cache /proc/no-such-dir/http-cache.sqlite"),
    ],
)
async def test_bad_input_at_the_edges_is_one_line_and_exit_2(
    tmp_path: Path, source: str, args: list[str], message: str
) -> None:
    spider = write(tmp_path, "s.py", source)
    code, stdout, stderr = await eclaw("crawl", spider, *args, "--log-level", "WARNING")
    assert code == 2, (stdout, stderr)
    (line,) = stderr.strip().splitlines()
    assert line.startswith("eclaw: error: ") and message in line
    assert "pw@" not in line


def redirecting_site(other: str) -> tuple[web.Application, dict[str, int]]:
    hits: dict[str, int] = {}

    async def handler(request: web.Request) -> web.Response:
        hits[request.path] = hits.get(request.path, 0) + 1
        targets = {
            "/hop1": "/hop2",
            "/hop2": f"{other}/stolen",  # the third hop leaves the allowed domain
            "/to-file": "file:///etc/passwd",
            "/to-js": "javascript:alert(1)",
            "/to-data": "data:text/html,<h1>x</h1>",
        }
        if request.path in targets:
            raise web.HTTPFound(targets[request.path])
        if request.path == "/private":
            return web.Response(status=404, text="no")
        return web.Response(text="<title>ok</title>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    return app, hits


class Pages(Spider):
    name = "pages"
    allowed_domains = ["127.0.0.1"]

    async def start_requests(self) -> Any:  # as found links: a start URL (dont_filter) may leave, as in Scrapy
        for url in self.start_urls:
            yield Request(url)

    def parse(self, response: Response) -> Any:
        yield {"url": response.url}


async def test_redirects_never_leave_http_or_the_allowed_domains() -> None:
    other_app, other_hits = redirecting_site("")
    async with serve(other_app) as other:
        offsite = other.replace("127.0.0.1", "localhost")  # same machine, another host name
        app, hits = redirecting_site(offsite)
        async with serve(app) as base:
            paths = ["/hop1", "/to-file", "/to-js", "/to-data"]
            items, stats = await collect(Pages, engine=Engine(), start_urls=[base + p for p in paths])
    assert items == [] and other_hits == {}  # the off-site host was never contacted
    assert hits == {"/hop1": 1, "/hop2": 1, "/to-file": 1, "/to-js": 1, "/to-data": 1}
    assert stats.dropped_by_reason == {"offsite redirect": 1}
    assert stats.failed_by_reason == {"redirect to unsupported scheme": 3}
    assert_accounted(stats)


async def test_credentials_in_urls_and_headers_stay_out_of_logs_and_files(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secret, token = "pa55-w0rd", "t0ken-xyz"
    app, _ = redirecting_site("")

    class Private(Spider):
        name = "private"

        def start_requests(self) -> Any:
            yield Request(self.base.replace("http://", f"http://bob:{secret}@") + "/private")
            yield Request(self.base + "/private?2", headers={"Authorization": f"Bearer {token}"})
            both = self.base.replace("http://", f"http://bob:{secret}@") + "/private?3"
            yield Request(both, headers={"Authorization": f"Bearer {token}"})  # aiohttp refuses: a clean failure

        def parse(self, response: Response) -> Any:
            return []

    async with serve(app) as base:
        _, stats = await collect(Private, engine=Engine(), base=base)
    assert stats.failed_by_reason == {"http 404": 2, "bad request": 1}
    records = read_jsonl(record_file("private", "failures"))
    assert len(records) == 3 and sum("bob:***@" in r["url"] for r in records) == 2
    assert "Traceback" not in caplog.text
    for text in (caplog.text, str(records), stats.summary()):
        assert secret not in text and token not in text
