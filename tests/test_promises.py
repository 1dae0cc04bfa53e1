"""Reliability promises the rest of the suite let through, found by a mutation audit (each test
fails with a small plausible bug that the rest of the suite passes with):

- robots.txt binds ``dont_filter`` requests, fresh and after a resume; a 500 disallows all;
  rules are per scheme://host:port;
- a transient status the spider handles is still retried (and waits its Retry-After);
  every transient status is retried, no permanent one;
- accounting: a download cut off at shutdown is pending; a failing errback is counted;
- filters: look-alike hosts are offsite; a page refused for depth is crawled when met less
  deep; a URL of exactly ``max_url_length``; a POST is not a duplicate of a GET;
- limits: a body of exactly ``max_response_size``, a chain of exactly ``max_redirects``;
- a write cut short is undone and its item dead-lettered;
- a password in a URL reaches no log line and no file."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web

from eclaw import Engine, IgnoreRequest, Request, Response, Spider
from eclaw.events import ItemStored, RequestFailed
from eclaw.middlewares import Retry, UserAgent
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, gaps, recorder
from tests.state.archive import LOREM, Archive

ROOT = Path(__file__).parents[1]

ROBOTS = "User-agent: *\nDisallow: /staff\n"


class Library:
    """A lending library: a public catalogue, staff pages robots.txt forbids, and a desk
    that answers ``/desk/NAME?status=S&times=K`` with status S K times, then 200."""

    def __init__(self) -> None:
        self.robots_status = 200
        self.hits: Counter[str] = Counter()
        self.times: dict[str, list[float]] = {}

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path
        self.hits[path] += 1
        self.times.setdefault(path, []).append(asyncio.get_running_loop().time())
        if path == "/robots.txt":
            return web.Response(status=self.robots_status, text=ROBOTS, content_type="text/plain")
        if path.startswith("/desk/") and self.hits[path] <= int(request.query.get("times", "0")):
            headers = {"Retry-After": request.query["after"]} if "after" in request.query else {}
            return web.Response(status=int(request.query["status"]), text="not now", headers=headers)
        return web.Response(text=f"<title>{path}</title>", content_type="text/html")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        return app

    def staff_hits(self) -> int:
        return sum(n for path, n in self.hits.items() if path.startswith("/staff"))


# -- robots.txt and dont_filter -------------------------------------------------------------------


class Catalogue(Spider):
    """Asks for staff pages with ``dont_filter=True`` (as a resumed crawl marks every request)."""

    name = "catalogue"
    allowed_domains = ["127.0.0.1"]
    custom_settings = {"obey_robots": True, "retries": 0}

    def start_requests(self) -> Any:
        yield Request(self.base + "/staff/rota", dont_filter=True)
        yield Request(self.base + "/catalogue")

    def parse(self, response: Response) -> Any:
        yield {"path": urlsplit(response.url).path}
        if response.url.endswith("/catalogue"):
            for n in range(3):
                yield Request(f"{self.base}/book/{n}")
                yield Request(f"{self.base}/staff/ledger/{n}", dont_filter=True)


async def test_robots_txt_binds_dont_filter_requests() -> None:
    library = Library()
    async with serve(library.app()) as base:
        items, stats = await collect(Catalogue, base=base)
    assert library.staff_hits() == 0
    assert sorted(i["path"] for i in items) == ["/book/0", "/book/1", "/book/2", "/catalogue"]
    assert stats.dropped_by_reason == {"robots": 4}
    assert_accounted(stats)


async def test_robots_txt_answering_500_disallows_everything() -> None:
    library = Library()
    library.robots_status = 500
    async with serve(library.app()) as base:
        items, stats = await collect(Catalogue, base=base)
    assert items == [] and stats.dropped_by_reason == {"robots": 2}
    assert set(library.hits) == {"/robots.txt"}


async def test_robots_txt_is_per_port_two_sites_on_one_host_keep_their_own_rules() -> None:
    """Two sites on 127.0.0.1: the first forbids /staff, the second has no robots.txt."""
    strict, open_ = Library(), Library()
    open_.robots_status = 404

    class Both(Spider):
        name = "both"
        custom_settings = {"obey_robots": True}

        def start_requests(self) -> Any:
            for base in (self.strict, self.open):
                yield Request(base + "/staff/rota")
                yield Request(base + "/book/1")

        def parse(self, response: Response) -> Any:
            yield {"url": response.url}

    async with serve(strict.app()) as first, serve(open_.app()) as second:
        items, stats = await collect(Both, strict=first, open=second)
    assert strict.staff_hits() == 0 and open_.staff_hits() == 1
    assert strict.hits["/robots.txt"] == open_.hits["/robots.txt"] == 1
    assert len(items) == 3 and stats.dropped_by_reason == {"robots": 1}


async def test_robots_txt_binds_the_requests_of_a_resumed_crawl(tmp_path: Path) -> None:
    """Paused with the staff pages queued; the resumed crawl restores them (``dont_filter``, as
    every restored request) and must still drop them, unfetched."""
    library = Library()

    async def run(pause: bool, **overrides: Any) -> Any:
        settings = {"checkpoint_interval": 60, "store": "", "failures": "", **overrides}
        engine = Engine(state_dir=tmp_path / "state", overrides=settings)

        async def stop_at_the_catalogue(event: ItemStored) -> None:
            if pause and event.item["path"] == "/catalogue":
                engine.stop("paused by the test")

        engine.subscribe(ItemStored, stop_at_the_catalogue)
        async with engine:
            return await engine.crawl(Catalogue, base=base)

    async with serve(library.app()) as base:
        first = await run(True, download_delay=0.3)  # one download every 0.3 s: the rest wait in the queue
        assert first.requests_pending == 6  # three books and three staff pages
        last = await run(False)
    assert library.staff_hits() == 0
    assert last.finish_reason == "finished" and last.dropped_by_reason == {"robots": 4}
    assert {path: n for path, n in library.hits.items() if path.startswith("/book/")} == {
        f"/book/{n}": 1 for n in range(3)
    }
    assert_accounted(last)


# -- retry --------------------------------------------------------------------------------------


class Desk(Spider):
    name = "desk"
    handle_httpstatus_list = [429, 503]

    def parse(self, response: Response) -> Any:
        yield {"path": urlsplit(response.url).path, "status": response.status}


async def crawl_desk(spider: type[Spider], paths: list[str], retry: Retry) -> tuple[Library, list[Any], Any, list[Any]]:
    library = Library()
    engine = Engine(middlewares=[retry, UserAgent()])
    failures: list[RequestFailed] = []
    engine.subscribe(RequestFailed, recorder(failures))
    async with serve(library.app()) as base:
        items, stats = await collect(spider, engine=engine, start_urls=[base + p for p in paths])
    assert_accounted(stats)
    return library, items, stats, failures


async def test_a_handled_transient_status_is_still_retried_and_the_callback_gets_the_200() -> None:
    library, items, stats, failures = await crawl_desk(Desk, ["/desk/a?status=503&times=2"], Retry(3, base=0.02))
    assert library.hits["/desk/a"] == 3
    assert stats.retries == 2 and [(f.attempt, f.final, f.reason) for f in failures] == [
        (1, False, "http 503"),
        (2, False, "http 503"),
    ]
    assert items == [{"path": "/desk/a", "status": 200}]
    assert stats.requests_parsed == 1 and stats.requests_failed == 0


async def test_a_handled_status_that_never_clears_reaches_the_callback_after_the_last_attempt() -> None:
    library, items, stats, _ = await crawl_desk(Desk, ["/desk/b?status=503&times=99"], Retry(2, base=0.01))
    assert library.hits["/desk/b"] == 3 and stats.retries == 2
    assert items == [{"path": "/desk/b", "status": 503}] and stats.requests_failed == 0


async def test_a_handled_429_waits_its_retry_after() -> None:
    library, items, _, _ = await crawl_desk(Desk, ["/desk/c?status=429&times=1&after=1"], Retry(3, base=0.01))
    assert items == [{"path": "/desk/c", "status": 200}]
    (wait,) = gaps(library.times["/desk/c"])
    assert wait >= 0.95  # the server's Retry-After, not the 0.01 s backoff


class Plain(Spider):
    name = "plain"

    def parse(self, response: Response) -> Any:
        yield {"path": urlsplit(response.url).path}


async def test_every_transient_status_is_retried_and_no_permanent_one() -> None:
    transient = [408, 429, 500, 502, 503, 504, 522, 524]
    permanent = [400, 403, 404, 410, 501]
    paths = [f"/desk/{code}?status={code}&times=1" for code in transient + permanent]
    library, items, stats, _ = await crawl_desk(Plain, paths, Retry(2, base=0.01))
    hits = {int(path.rsplit("/", 1)[1]): n for path, n in library.hits.items()}
    assert hits == {**{code: 2 for code in transient}, **{code: 1 for code in permanent}}
    assert sorted(int(i["path"].rsplit("/", 1)[1]) for i in items) == transient
    assert stats.failed_by_reason == {f"http {code}": 1 for code in permanent}


# -- accounting when a crawl is stopped, and a failing errback ---------------------------------------


class Stalls:
    """``/fast/N`` answer at once; ``/stall`` answers after five seconds."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        if request.path == "/stall":
            self.started.set()
            await asyncio.sleep(5)
        return web.Response(text=f"<title>{request.path}</title>", content_type="text/html")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        return app


async def test_a_download_cut_off_by_the_shutdown_timeout_is_counted_pending() -> None:
    stalls = Stalls()
    engine = Engine(overrides={"shutdown_timeout": 1.5})  # /fast/1 finishes within it, /stall (5 s) not
    async with serve(stalls.app()) as base, engine:
        crawl = engine.prepare(Plain, start_urls=[base + "/stall", base + "/fast/1"])
        task = asyncio.create_task(engine.run_crawl(crawl))
        await asyncio.wait_for(stalls.started.wait(), 5)
        engine.stop("paused by the test")
        stats = await asyncio.wait_for(task, 4)  # the stalled download is abandoned after 1.5 s
    assert stats.requests_pending == 1 and stats.requests_failed == 0
    assert_accounted(stats)


class BrokenErrback(Spider):
    name = "broken-errback"

    def start_requests(self) -> Any:
        yield Request(self.base + "/desk/x?status=404&times=9", errback=self.on_error)
        yield Request(self.base + "/book/1")

    def parse(self, response: Response) -> Any:
        yield {"path": urlsplit(response.url).path}

    def on_error(self, failure: RequestFailed) -> Any:
        yield {"path": "from the errback"}
        raise LookupError("an errback bug")


async def test_a_failing_errback_is_logged_counted_and_the_crawl_goes_on() -> None:
    library = Library()
    async with serve(library.app()) as base:
        items, stats = await collect(BrokenErrback, base=base)
    assert sorted(i["path"] for i in items) == ["/book/1", "from the errback"]
    assert stats.handler_errors == 1 and stats.failed_by_reason == {"http 404": 1}
    assert_accounted(stats)


# -- nothing off-site reaches the fetcher ----------------------------------------------------------


class Borders(Spider):
    """Links to the allowed domain, a subdomain of it, and look-alike hosts that only end with its name."""

    name = "borders"
    allowed_domains = ["127.0.0.1", "library.test"]
    hosts = ["library.test", "branch.library.test", "evillibrary.test", "library.test.evil", "mylibrary.test"]

    def parse(self, response: Response) -> Any:
        yield {"path": urlsplit(response.url).path}
        for host in self.hosts:
            yield Request(f"http://{host}/catalogue")


async def test_hosts_that_merely_end_with_an_allowed_domain_are_offsite() -> None:
    reached: list[str] = []

    async def gate(request: Request, call_next: Any) -> Response:
        """Sees every request that would be downloaded; the .test hosts go no further (no DNS)."""
        host = urlsplit(request.url).hostname or ""
        reached.append(host)
        if host != "127.0.0.1":
            raise IgnoreRequest("test host")
        return await call_next(request)  # type: ignore[no-any-return]

    library = Library()
    async with serve(library.app()) as base:
        _, stats = await collect(Borders, engine=Engine(middlewares=[gate]), start_urls=[base + "/catalogue"])
    assert sorted(reached) == ["127.0.0.1", "branch.library.test", "library.test"]
    assert stats.dropped_by_reason == {"offsite": 3, "test host": 2}
    assert_accounted(stats)


# -- a page refused for depth is crawled when met again nearer the start ------------------------------


def linked_site(links: dict[str, list[str]], slow: dict[str, float]) -> tuple[web.Application, Counter[str]]:
    hits: Counter[str] = Counter()

    async def handle(request: web.Request) -> web.Response:
        hits[request.path] += 1
        await asyncio.sleep(slow.get(request.path, 0))
        anchors = "".join(f'<a href="{href}">{href}</a>' for href in links.get(request.path, []))
        return web.Response(text=f"<title>{request.path}</title>{anchors}", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    return app, hits


class Follows(Spider):
    name = "follows"
    allowed_domains = ["127.0.0.1"]

    def parse(self, response: Response) -> Any:
        yield {"path": urlsplit(response.url).path}
        yield from response.follow_all(css="a")


async def test_a_page_too_deep_by_one_path_is_crawled_when_a_shorter_path_reaches_it() -> None:
    """max_depth 1: /reading-room is first met at depth 2 (refused), then at depth 1 from a slow
    start page: the second, in-scope meeting must fetch it."""
    links = {"/quick": ["/quick/shelf"], "/quick/shelf": ["/reading-room"], "/slow": ["/reading-room"]}
    app, hits = linked_site(links, slow={"/slow": 0.5})
    async with serve(app) as base:
        engine = Engine(overrides={"max_depth": 1})
        items, stats = await collect(Follows, engine=engine, start_urls=[base + "/quick", base + "/slow"])
    assert hits["/reading-room"] == 1
    assert sorted(i["path"] for i in items) == ["/quick", "/quick/shelf", "/reading-room", "/slow"]
    assert stats.dropped_by_reason == {"max depth": 1}
    assert_accounted(stats)


# -- filters at their edges: URL length, methods ---------------------------------------------------------


def recording_site() -> tuple[web.Application, Counter[tuple[str, str]]]:
    hits: Counter[tuple[str, str]] = Counter()

    async def handle(request: web.Request) -> web.Response:
        hits[request.method, request.path] += 1
        return web.Response(text=f"<title>{request.method} {request.path}</title>", content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app, hits


async def test_a_url_of_exactly_max_url_length_is_fetched_and_one_longer_is_not() -> None:
    app, hits = recording_site()
    async with serve(app) as base:
        fits = base + "/" + "a" * (80 - len(base) - 1)
        too_long = base + "/" + "b" * (81 - len(base) - 1)
        assert (len(fits), len(too_long)) == (80, 81)
        engine = Engine(overrides={"max_url_length": 80})
        items, stats = await collect(Plain, engine=engine, start_urls=[fits, too_long])
    assert list(hits) == [("GET", urlsplit(fits).path)] and len(items) == 1
    assert stats.dropped_by_reason == {"url too long": 1}


class Loans(Spider):
    """Renews a loan with a POST (no form fields) to the page it just read with a GET."""

    name = "loans"

    def start_requests(self) -> Any:
        yield Request(self.base + "/loans/42")

    def parse(self, response: Response) -> Any:
        yield {"page": response.css("title::text").get()}
        if response.request.method == "GET":
            yield Request(response.url, method="POST", callback=self.parse)
            yield Request(response.url, method="POST", callback=self.parse)  # the same POST: a duplicate


async def test_a_post_to_a_url_already_fetched_with_get_is_not_a_duplicate() -> None:
    app, hits = recording_site()
    async with serve(app) as base:
        items, stats = await collect(Loans, base=base)
    assert hits == {("GET", "/loans/42"): 1, ("POST", "/loans/42"): 1}
    assert sorted(i["page"] for i in items) == ["GET /loans/42", "POST /loans/42"]
    assert stats.dropped_by_reason == {"duplicate": 1}
    assert_accounted(stats)


# -- size limit and redirect limit at their edges -----------------------------------------------------

LIMIT = 4096


def sized_site() -> web.Application:
    """``/declared/N``: N bytes with a Content-Length; ``/chunked/N``: N bytes, chunked, length unknown;
    ``/hops/N``: N redirects, then a page."""

    async def declared(request: web.Request) -> web.Response:
        return web.Response(body=b"<p>" + b"z" * (int(request.match_info["n"]) - 3), content_type="text/html")

    async def chunked(request: web.Request) -> web.StreamResponse:
        size = int(request.match_info["n"])
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, size, 1000):
            await response.write(b"y" * min(1000, size - start))
        await response.write_eof()
        return response

    async def hops(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n:
            raise web.HTTPFound(f"/hops/{n - 1}")
        return web.Response(text="<title>arrived</title>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/declared/{n}", declared)
    app.router.add_get("/chunked/{n}", chunked)
    app.router.add_get("/hops/{n}", hops)
    return app


async def test_a_body_of_exactly_max_response_size_is_taken_and_one_byte_more_is_not() -> None:
    paths = [f"/{kind}/{size}" for kind in ("declared", "chunked") for size in (LIMIT, LIMIT + 1)]
    async with serve(sized_site()) as base:
        engine = Engine(overrides={"max_response_size": LIMIT, "retries": 0})
        items, stats = await collect(Plain, engine=engine, start_urls=[base + p for p in paths])
    assert sorted(i["path"] for i in items) == [f"/chunked/{LIMIT}", f"/declared/{LIMIT}"]
    assert stats.failed_by_reason == {"too large": 2}
    assert stats.bytes_downloaded == 2 * LIMIT


async def test_a_chain_of_exactly_max_redirects_hops_is_followed_and_one_more_is_not() -> None:
    async with serve(sized_site()) as base:
        engine = Engine(overrides={"max_redirects": 4, "retries": 0})
        items, stats = await collect(Plain, engine=engine, start_urls=[base + "/hops/4", base + "/hops/5"])
    assert [i["path"] for i in items] == ["/hops/0"]
    assert stats.failed_by_reason == {"too many redirects": 1}


# -- a write cut short: undone, the item dead-lettered ---------------------------------------------------


async def test_a_write_cut_short_by_a_file_size_limit_is_undone_and_the_item_dead_lettered(tmp_path: Path) -> None:
    """The CLI crawl runs under RLIMIT_FSIZE: the output takes five records whole, then one
    write lands only part of a record before failing (EFBIG, as on a full quota). That part must
    be undone, and every record that did not fit must be in the dead-letter file, whole."""
    archive = Archive(shelves=1, per_shelf=9)
    archive.hang = False
    line = len(json.dumps({"record": "0-0", "title": "Akte 0-0", "text": LOREM * 60}, ensure_ascii=False).encode()) + 1
    limit = 5 * line + line // 2  # the sixth record is cut in the middle
    run = (
        "import resource, runpy, sys;"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}));"
        "sys.argv = ['eclaw', *sys.argv[1:]];"
        "runpy.run_module('eclaw', run_name='__main__')"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    async with serve(archive.app()) as base:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", run, "crawl", f"{ROOT / 'tests/state/archive.py'}:RecordSpider",
            "-a", f"base_url={base}", "-o", str(tmp_path / "items.jsonl"), "-s", "store=", "-s", "failures=",
            "-s", f"dead_letter={tmp_path / 'dead.jsonl'}", "-s", "concurrency=1", "--log-level", "ERROR",
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 3, stderr.decode()[-2000:]  # 3: items were dead-lettered
    written = [json.loads(text)["record"] for text in (tmp_path / "items.jsonl").read_text().splitlines()]
    dead = [json.loads(text)["item"]["record"] for text in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert len(written) == 5 and (tmp_path / "items.jsonl").stat().st_size == 5 * line
    assert sorted(written + dead) == sorted(f"0-{k}" for k in range(9))
    assert re.search(r"output error: OSError +4\n", stdout.decode()), stdout.decode()


# -- secrets: no password from a URL in any log line or file ---------------------------------------------

SECRET = "s3cr3t-Pa55"


class Members(Spider):
    """Member pages behind a password in the URL, hitting every path that logs or records a URL:
    a retried 503, a callback that raises, an errback that raises, an item a pipeline fails on,
    and robots.txt (fetched for the host, with the URL's credentials)."""

    name = "members"
    custom_settings = {"obey_robots": True}

    def start_requests(self) -> Any:
        secret = self.base.replace("http://", f"http://member:{SECRET}@")
        yield Request(secret + "/desk/busy?status=503&times=1")
        yield Request(secret + "/book/raises")
        yield Request(secret + "/desk/gone?status=404&times=9", errback=self.on_error)
        yield Request(secret + "/book/item")

    def parse(self, response: Response) -> Any:
        if response.url.endswith("/raises"):
            raise ValueError("cannot parse this page")
        yield {"path": urlsplit(response.url).path}

    def on_error(self, failure: RequestFailed) -> Any:
        raise LookupError("an errback bug")


async def refuse(item: dict[str, Any], spider: Spider) -> dict[str, Any]:
    if item["path"] == "/book/item":
        raise OSError("disk on fire")
    return item


async def test_a_password_in_the_url_reaches_no_log_line_and_no_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    library = Library()
    library.robots_status = 404  # logged at DEBUG, with the robots.txt URL
    settings = {"retries": 1, "dead_letter": str(tmp_path / "dead.jsonl"), "failures": str(tmp_path / "failed.jsonl")}
    engine = Engine(overrides=settings, pipelines=[refuse])
    async with serve(library.app()) as base:
        items, stats = await collect(Members, engine=engine, base=base)
    assert items == [{"path": "/desk/busy"}] and library.hits["/robots.txt"] == 1
    assert stats.retries == 1 and stats.handler_errors == 1
    assert stats.failed_by_reason == {"callback error: ValueError": 1, "http 404": 1}
    assert stats.items_dropped_by_reason == {"pipeline error: OSError": 1}
    files = {name: (tmp_path / name).read_text() for name in ("dead.jsonl", "failed.jsonl")}
    assert all(files.values()) and all("member:***@" in text for text in files.values())
    for where, text in {"log": caplog.text, **files, "stats": stats.summary()}.items():
        assert SECRET not in text, f"the password is in the {where}"

    caplog.clear()  # robots.txt unreachable (503): a warning naming it, everything on the host dropped
    library.robots_status = 503
    async with serve(library.app()) as base:
        items, stats = await collect(Members, engine=Engine(overrides=settings), base=base)
    assert items == [] and stats.dropped_by_reason == {"robots": 4}
    assert "robots.txt unreachable (http 503)" in caplog.text and SECRET not in caplog.text
