"""Secrets never reach disk: each writer of a crawl run through the ``eclaw`` CLI (or the API)
against a local site keeps no bearer token, cookie, URL password, proxy password or secret argument.

The crawl's spider plants them: an ``Authorization: Bearer`` header and a ``Cookie`` header on every
request, a ``meta["cookies"]`` value, a password in every URL, the secret argument in its DEBUG lines
and in the error its broken page raises; the ``proxies`` setting names a real tinyproxy with basic auth.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import sqlite3
import textwrap
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, closing
from pathlib import Path
from urllib.parse import quote

from aiohttp import web

from eclaw import Engine, Request, Spider
from eclaw.testing import serve
from tests.inprocess import eclaw_inprocess
from tests.proxies import tinyproxy

TOKEN = "CANARY1tokenX"  # Authorization: Bearer
URL_PASSWORD = "CANARY2urlpw"  # http://user:PASSWORD@host/
PROXY_PASSWORD = "CANARY3proxypw"  # proxies=http://u:PASSWORD@127.0.0.1:port
ARG_PASSWORD = "CANARY4argpw"  # -a password=
COOKIE = "CANARY5cookie"  # Cookie: sid= and meta["cookies"]
CANARIES = {
    "bearer token": [TOKEN],
    "URL password": [URL_PASSWORD, base64.b64encode(f"user:{URL_PASSWORD}".encode()).decode()],
    "proxy password": [PROXY_PASSWORD, base64.b64encode(f"u:{PROXY_PASSWORD}".encode()).decode()],
    "secret argument": [ARG_PASSWORD],
    "cookie": [COOKIE],
}

SPIDER = textwrap.dedent(
    f'''
    from eclaw import Request, Spider

    HEADERS = {{"Authorization": "Bearer {TOKEN}", "Cookie": "sid={COOKIE}"}}


    class Canary(Spider):
        name = "canary"
        base_url = ""
        password = ""

        def secret(self, path):
            """A request with planted secrets: cookies, and a bearer token or (aiohttp takes one only) a
            password in its URL."""
            if path in ("/", "/a", "/fail"):
                base = self.base_url.replace("http://", "http://user:{URL_PASSWORD}@")
                return Request(base + path, headers={{"Cookie": "sid={COOKIE}"}}, cookies={{"jar": "{COOKIE}"}})
            return Request(self.base_url + path, headers=HEADERS, cookies={{"jar": "{COOKIE}"}})

        async def start_requests(self):
            self.logger.debug("logging in with password %s", self.password)
            yield self.secret("/")

        def parse(self, response):
            self.logger.debug("got %s for %r", response.url, dict(response.request.headers))
            if response.url.endswith("/boom"):
                raise ValueError(f"broken page, password {{self.password}}, {{response.request.headers}}")
            for href in response.css("a::attr(href)").getall():
                yield self.secret(href)
            yield {{"url": response.url.replace("{URL_PASSWORD}", "")}}
    '''
)


def site() -> web.Application:
    """``/`` links to two pages, a 500, a page the callback fails on, and a page whose links are too deep."""

    async def page(request: web.Request) -> web.Response:
        path = request.path
        if path == "/fail":
            return web.Response(status=500, text="down")
        links = {"/": ["/a", "/b", "/fail", "/boom", "/deep"], "/deep": ["/deeper"]}.get(path, [])
        body = "".join(f'<a href="{href}">{href}</a>' for href in links)
        return web.Response(text=f"<html><body><h1>{path}</h1>{body}</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    return app


@asynccontextmanager
async def planted(tmp_path: Path) -> AsyncIterator[tuple[str, str, str]]:
    """The site, tinyproxy asking for the proxy password, and the spider file: (base URL, proxy URL, spider)."""
    spider = tmp_path / "canary_spider.py"
    spider.write_text(SPIDER)
    async with serve(site()) as base, tinyproxy(tmp_path.parent, ("u", PROXY_PASSWORD)) as (proxy, _):
        yield base, f"http://u:{PROXY_PASSWORD}@{proxy}", str(spider)


async def eclaw(cwd: Path, *args: str) -> tuple[int, str, str]:
    """Run the ``eclaw`` CLI in ``cwd`` (the default ``eclaw-data/`` files land there), in this process
    (:mod:`tests.inprocess`: its stdout, stderr and console logging captured): exit code, stdout, stderr."""
    with contextlib.chdir(cwd):
        return await eclaw_inprocess(*args)


async def crawl(tmp_path: Path, *extra: str, cwd: Path | None = None) -> tuple[str, str]:
    """One crawl of the planted spider with ``extra`` CLI options, in ``cwd`` (default ``tmp_path``, where
    the spider file is); returns its stdout and stderr."""
    async with planted(tmp_path) as (base, proxy, spider):
        code, out, err = await eclaw(
            cwd or tmp_path, "crawl", spider, "-a", f"base_url={base}", "-a", f"password={ARG_PASSWORD}",
            "-s", f"proxies={proxy}", "-s", "retries=0", "-s", "max_depth=1", "-q", *extra,
        )  # fmt: skip
    assert code in (0, 3), err  # pages failed, items all stored
    return out, err


def forms(secret: str) -> set[str]:
    """How a secret may be written: as is, percent-encoded, JSON-escaped."""
    return {secret, quote(secret, safe=""), json.dumps(secret)[1:-1]}


def texts(path: Path) -> Iterable[str]:
    """What a file holds, as text: its bytes, decompressed if gzip, each SQLite value if a database."""
    data = path.read_bytes()
    yield data.decode("latin-1")
    if data[:2] == b"\x1f\x8b":
        yield gzip.decompress(data).decode("latin-1")
    if data[:16] == b"SQLite format 3\x00" and not path.name.endswith(("-wal", "-shm")):
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            yield "\n".join(db.iterdump())


def leaks(root: Path, text: Iterable[tuple[str, str]] = ()) -> list[str]:
    """Every planted secret found in a file under ``root`` (or in ``text``: (where, text) pairs)."""
    found = []
    sources = [(str(p.relative_to(root)), t) for p in sorted(root.rglob("*")) if p.is_file() for t in texts(p)]
    for where, content in [*sources, *text]:
        for what, secrets in CANARIES.items():
            if any(form in content for secret in secrets for form in forms(secret)):
                found.append(f"{what} in {where}")
    return sorted(set(found))


def written(root: Path, pattern: str) -> list[Path]:
    files = sorted(root.rglob(pattern))
    assert files, f"no {pattern} written under {root}"
    return files


async def test_error_snapshots_keep_no_bearer_token_cookie_or_proxy_password(tmp_path: Path) -> None:
    """A snapshot (on by default) of a page whose callback failed: request headers, meta cookies and
    the meta proxy URL are there, their values ``***``."""

    class Broken(Spider):
        name = "broken"

        def parse(self, response: object) -> None:
            raise ValueError("no product here")

    async with serve(site()) as base, tinyproxy(tmp_path, ("u", PROXY_PASSWORD)) as (proxy, _):
        request = Request(
            base + "/a", headers={"Authorization": f"Bearer {TOKEN}", "Cookie": f"sid={COOKIE}"},
            cookies={"jar": COOKIE}, meta={"proxy": f"http://u:{PROXY_PASSWORD}@{proxy}"},
        )  # fmt: skip
        Broken.start_requests = lambda self: _one(request)  # type: ignore[method-assign]
        async with Engine(overrides={"snapshots": str(tmp_path / "snaps"), "store": ""}) as engine:
            stats = await engine.crawl(Broken)
    assert stats.requests_failed == 1
    snapshot = json.loads(written(tmp_path / "snaps", "snapshot.json")[0].read_text())
    assert snapshot["request"]["headers"]["Authorization"] == "***"  # a reader sees it was there
    assert leaks(tmp_path / "snaps") == []


async def _one(request: Request) -> AsyncIterator[Request]:
    yield request


async def test_trace_and_report_keep_no_url_password(tmp_path: Path) -> None:
    await crawl(tmp_path, "--trace", "trace.jsonl")
    code, _, err = await eclaw(tmp_path, "report", "trace.jsonl", "-o", "report.html")
    assert code == 0, err
    assert "user:***@127.0.0.1" in (tmp_path / "trace.jsonl").read_text()
    assert [leak for leak in leaks(tmp_path) if leak.endswith((" trace.jsonl", " report.html"))] == []


async def test_record_folder_keeps_no_secret_argument(tmp_path: Path) -> None:
    """``--record``: the arguments are kept for a replay, the secret one as ``***``; a replay asks for it."""
    await crawl(tmp_path, "--record", "rec", "-a", "api_key=CANARY4argpw", "-a", "color=blue")
    about = json.loads((tmp_path / "rec" / "recording.json").read_text())
    assert about["args"]["password"] == about["args"]["api_key"] == "***"
    assert about["args"]["color"] == "blue"
    assert leaks(tmp_path / "rec") == []
    code, _, err = await eclaw(tmp_path, "replay", str(tmp_path / "canary_spider.py"), "--from", "rec")
    assert code == 2 and "-a password=..." in err, err


async def test_logs_at_debug_keep_no_secret(tmp_path: Path) -> None:
    """Console and ``--log-file`` at DEBUG, JSON lines, tracebacks included."""
    _, err = await crawl(tmp_path, "--log-level", "DEBUG", "--log-format", "json", "--log-file", "crawl.log")
    log = (tmp_path / "crawl.log").read_text()
    assert "password ***" in log and '"Authorization": "***"' in log.replace("'", '"')
    assert "ValueError: broken page" in log  # the callback's traceback is there, redacted
    assert "password ***" in err  # the console's DEBUG lines were captured: their check below is not empty
    assert leaks(tmp_path / "eclaw-data", [("crawl.log", log), ("the console", err)]) == []


async def test_failures_and_drops_keep_no_secret(tmp_path: Path) -> None:
    await crawl(tmp_path)
    failures = [json.loads(line) for line in written(tmp_path, "failures.jsonl")[0].read_text().splitlines()]
    drops = [json.loads(line) for line in written(tmp_path, "drops.jsonl")[0].read_text().splitlines()]
    assert {f["reason"].split(":")[0] for f in failures} >= {"callback error"}
    assert any(d["reason"] == "max depth" for d in drops)
    assert leaks(tmp_path / "eclaw-data" / "canary", []) == []
