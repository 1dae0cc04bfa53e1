"""The browser fetcher in a real headless Chromium, against a site that is nothing without JavaScript
(tests/jssite.py: an infinite scroll fed by a JSON API, a client-side router, tickets behind a click).

A Chromium launch costs about a CPU-second (Playwright's driver with it) and each page a few tenths:
the tests share three browsers of the module (``shared``, ``blocking``, ``unblocked``), each test in
contexts or counters of its own. A crawl renders in one of them (:func:`borrowing`) unless what the
crawl opens is what its test is about (a spider's own browser settings and screenshots)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.events import ItemStored
from eclaw.exceptions import ConnectError
from eclaw.fetchers.browser import BrowserFetcher, actions
from eclaw.fetchers.router import FETCHERS, Fetchers
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, read_bytes, read_jsonl, record_file, until
from tests.jssite import GigSite, gig_ids
from tests.proxies import free_port, tinyproxy

# one browser for the tests that need no settings of their own
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("chromium")]

TICKETS = actions({"click": "button.tickets", "wait": 0.1}, {"wait_for": "li.ticket"})
LISTED = actions({"wait_for": "li.gig"})  # the API answers after the load event
BUSY = actions({"wait_for": "p.asking"})  # the page is asking for resources, and goes on until it closes
SCROLLED = actions({"wait_for": "li.gig"}, {"scroll": "until_stable", "wait": 0.5})


@pytest.fixture
def site() -> GigSite:
    return GigSite()


@pytest_asyncio.fixture(loop_scope="module")
async def base(site: GigSite) -> AsyncIterator[str]:
    async with serve(site.app()) as url:
        yield url


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared() -> AsyncIterator[BrowserFetcher]:
    """A browser with the default settings, for the tests that need no other."""
    async with browser() as fetcher:
        yield fetcher


class Gigs(Spider):
    """The listing, scrolled to its end, then each gig with its tickets shown."""

    name = "gigs"
    base_url = ""
    render = True

    async def start_requests(self) -> AsyncIterator[Request]:
        yield Request(self.base_url + "/", render=self.render, meta={"browser": SCROLLED})

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="a.gig", callback=self.parse_gig, render=True, meta={"browser": TICKETS})

    def parse_gig(self, response: Response) -> Any:
        yield {
            "url": response.url,
            "title": response.css("h1::text").get(),
            "tickets": response.css("li.ticket::text").getall(),
        }


@asynccontextmanager
async def browser(**settings: Any) -> AsyncIterator[BrowserFetcher]:
    fetcher = BrowserFetcher()
    await fetcher.open(Gigs(), Settings(store="", **settings))
    try:
        yield fetcher
    finally:
        await fetcher.close()


class Borrowed:
    """A crawl's browser fetcher that is a browser of the module: opened and closed by its fixture, not
    by the crawl (for the crawls whose test is about what happens to their requests, not the launch)."""

    def __init__(self, fetcher: BrowserFetcher) -> None:
        self._fetcher = fetcher

    async def open(self, spider: Spider, settings: Settings) -> None:
        return None

    async def fetch(self, request: Request) -> Response:
        return await self._fetcher.fetch(request)

    async def close(self) -> None:
        return None


def borrowing(fetcher: BrowserFetcher) -> Fetchers:
    """The crawl's fetcher (the router, as in every crawl) with ``fetcher`` as its browser."""
    return Fetchers({"plain": FETCHERS["plain"], "browser": lambda: Borrowed(fetcher)})


async def test_a_rendered_crawl_finds_what_a_plain_one_cannot(shared: BrowserFetcher) -> None:
    site = GigSite(pages=2)  # still scrolled for its second page
    async with serve(site.app()) as base:
        engine = Engine(Settings(store=""), fetcher=functools.partial(borrowing, shared))
        items, stats = await collect(Gigs, engine=engine, base_url=base)
        assert_accounted(stats)
        assert sorted(item["title"] for item in items) == sorted(site.title(n) for n in range(1, site.gigs + 1))
        assert all(item["tickets"] == ["standing", "balcony"] for item in items)  # there only after the click
        assert {item["url"] for item in items} == {f"{base}/gig/{n}" for n in range(1, site.gigs + 1)}

        plain, stats = await collect(Gigs, settings=Settings(store=""), base_url=base, render=False)
        assert plain == [] and stats.requests_parsed == 1  # the shell: no gig, no link


async def test_the_page_json_is_handed_to_the_callback(
    site: GigSite, base: str, shared: BrowserFetcher, unblocked: BrowserFetcher
) -> None:
    response = await shared.fetch(Request(base + "/", meta={"browser": SCROLLED}))
    api = await shared.fetch(Request(base + "/api/gigs?page=2", render=True))  # no HTML: as served
    assert gig_ids(response.text) == list(range(1, site.gigs + 1))
    xhr = response.meta["xhr"]
    assert [entry["url"] for entry in xhr] == [f"{base}/api/gigs?page={n}" for n in range(1, site.pages + 1)]
    assert [gig["id"] for entry in xhr for gig in entry["json"]["gigs"]] == list(range(1, site.gigs + 1))
    assert api.headers["Content-Type"].startswith("application/json") and api.json()["next"] == 3

    response = await unblocked.fetch(Request(base + "/", meta={"browser": LISTED}))  # a page of gigs: ~150 bytes
    [entry] = response.meta["xhr"]
    assert entry["json"] is None and "over what is left of browser_xhr_bytes" in entry["skipped"]


async def test_client_side_routing_the_response_is_where_the_page_ended(
    site: GigSite, base: str, shared: BrowserFetcher
) -> None:
    follow = actions({"wait_for": "a.gig"}, {"click": "a.gig"}, {"wait_for": "article h1"})
    response = await shared.fetch(Request(base + "/", meta={"browser": follow}))
    assert response.url == base + "/gig/1" and response.css("h1::text").get() == site.title(1)
    assert response.status == 200 and response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert site.hits["shell"] == 1  # pushState: no second document was loaded


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def blocking() -> AsyncIterator[BrowserFetcher]:
    """A browser that blocks the tracking script too, and never recycles a context."""
    async with browser(browser_block_urls="*/track.js*", browser_pages=4, browser_context_pages=0) as fetcher:
        yield fetcher


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def launched() -> AsyncIterator[tuple[BrowserFetcher, int]]:
    """A browser that blocks nothing, keeps 100 bytes of XHR answers and recycles a context after 3 pages,
    one page at a time; and the process id of its Chromium."""
    others = set(chromium_pids())
    settings = {"browser_block": "", "browser_xhr_bytes": 100, "browser_context_pages": 3, "browser_pages": 1}
    async with browser(**settings) as fetcher:
        [pid] = _roots(set(chromium_pids()) - others)
        yield fetcher, pid


@pytest.fixture(scope="module")
def unblocked(launched: tuple[BrowserFetcher, int]) -> BrowserFetcher:
    """The browser of :func:`launched`."""
    return launched[0]


async def test_blocked_resources_are_never_requested(
    site: GigSite, base: str, blocking: BrowserFetcher, unblocked: BrowserFetcher
) -> None:
    before = blocking.blocked
    response = await blocking.fetch(Request(base + "/", meta={"browser": SCROLLED}))
    assert blocking.blocked - before >= 2  # the tracker, the teaser video; images and fonts are not even asked for
    assert gig_ids(response.text) == list(range(1, site.gigs + 1))  # the page works without them
    assert (site.hits["image"], site.hits["font"], site.hits["tracker"]) == (0, 0, 0)

    site.hits.clear()
    await unblocked.fetch(Request(base + "/", meta={"browser": LISTED}))  # with nothing blocked: fetches them
    assert site.hits["image"] == site.per_page and site.hits["font"] == 1 and site.hits["tracker"] == 1


async def test_nothing_blocked_gets_through_while_a_page_closes(
    site: GigSite, base: str, blocking: BrowserFetcher
) -> None:
    """A page that asks for blocked resources until its last moment: each page closes in the middle of it
    (twice as many as the browser opens at once, each asking every 50 ms: with no leave before the close,
    some get through in nearly every run, and the test fails)."""
    before = blocking.blocked
    pages = [blocking.fetch(Request(f"{base}/busy?{n}", meta={"browser": BUSY})) for n in range(8)]
    done = await asyncio.gather(*pages)
    assert blocking.blocked - before > 8  # the route refused the scripts; images and fonts are not even asked for
    assert all(page.css("p.asking") for page in done)
    assert {kind: site.hits[kind] for kind in ("image", "font", "media", "tracker")} == dict.fromkeys(
        ("image", "font", "media", "tracker"), 0
    )


async def test_a_blocked_url_is_not_sent_as_a_page_is_left(site: GigSite, base: str, blocking: BrowserFetcher) -> None:
    """A keepalive fetch and a beacon sent on ``pagehide`` outlive the page, where no route sees them:
    the browser itself holds back what matches ``browser_block_urls`` (each page's ``/sent`` beacon,
    not blocked, shows that the others were sent)."""
    before = blocking.blocked
    pages = [blocking.fetch(Request(f"{base}/leaving?{n}")) for n in range(4)]
    assert all(page.css("p.here") for page in await asyncio.gather(*pages))
    await until(lambda: site.hits["sent"] == 4)
    await until(lambda: blocking.blocked - before >= 8)  # the browser's word of a held-back request comes on its own
    assert site.hits["tracker"] == 0
    assert blocking.blocked - before == 8


async def test_contexts_are_recycled_after_n_pages_and_after_a_ban(
    site: GigSite, base: str, unblocked: BrowserFetcher, blocking: BrowserFetcher
) -> None:
    listed = {"browser": actions({"wait_for": "li.gig"}, context="recycled")}  # a context of its own, 3 pages each
    fetch, before = unblocked.fetch, unblocked.contexts_created
    await fetch(Request(base + "/", meta={**listed, "cookies": {"member": "gold"}}))  # context 1
    await fetch(Request(base + "/", meta=listed))
    await fetch(Request(base + "/", meta=listed))
    await fetch(Request(base + "/", meta=listed))  # context 2: 1 served 3; its cookie goes on
    banned = await fetch(Request(base + "/banned", meta={"browser": actions(context="recycled")}))
    await fetch(Request(base + "/", meta=listed))  # context 3: 2 was banned; its cookies went
    assert (banned.status, unblocked.contexts_created - before) == (429, 3)
    assert [seen.cookie for seen in site.seen if seen.path == "/api/gigs"] == ["member=gold"] * 4 + [""]

    before = blocking.contexts_created  # browser_context_pages=0: never recycled
    for _ in range(2):
        await blocking.fetch(Request(base + "/about", meta={"browser": actions(context="kept")}))
    assert blocking.contexts_created - before == 1


async def test_the_request_cookies_reach_the_page_and_its_api(site: GigSite, base: str, shared: BrowserFetcher) -> None:
    guest = await shared.fetch(Request(base + "/", meta={"browser": LISTED}))
    member = await shared.fetch(Request(base + "/", headers={"Cookie": "member=gold"}, meta=_own("member-1")))
    cookies = [{"name": "member", "value": "gold"}]
    listed = await shared.fetch(Request(base + "/", meta={"cookies": cookies, **_own("member-2")}))
    assert guest.css("span.member").getall() == []
    assert member.css("span.member::text").getall() == [f"€{10 + n}" for n in range(1, site.per_page + 1)]
    assert len(listed.css("span.member")) == site.per_page
    assert [seen.cookie for seen in site.seen if seen.path == "/"] == ["", "member=gold", "member=gold"]


async def test_the_request_headers_and_method_go_with_the_page_not_its_resources(
    site: GigSite, base: str, shared: BrowserFetcher
) -> None:
    headers = {"User-Agent": "GigBot/1.0", "X-Tag": "box-office"}
    response = await shared.fetch(Request(base + "/", headers=headers, meta=_own("gigbot")))  # a context it opens
    refused = await shared.fetch(Request(base + "/about", method="POST", body=b"seat=12"))
    assert len(response.css("li.gig")) == site.per_page
    [page] = [seen for seen in site.seen if seen.path == "/"]
    assert (page.agent, page.tag) == ("GigBot/1.0", "box-office")
    resources = [seen for seen in site.seen if seen.path not in ("/", "/about")]
    assert {seen.path for seen in resources} >= {"/static/app.js", "/static/style.css", "/api/gigs"}
    # the context's user agent, and no tag: the page's own requests are the browser's (a failure names them)
    assert [seen for seen in resources if (seen.agent, seen.tag) != ("GigBot/1.0", "")] == []
    assert refused.status == 405 and refused.text.startswith("405")  # a POST, answered as served (text/plain)


def _own(name: str) -> dict[str, Any]:
    return {"browser": actions({"wait_for": "li.gig"}, context=name)}


async def test_a_proxy_carries_the_page_and_everything_it_fetches(
    site: GigSite, base: str, tmp_path: Path, shared: BrowserFetcher
) -> None:
    async with tinyproxy(tmp_path) as (proxy, _):
        response = await shared.fetch(Request(base + "/", meta={"proxy": f"http://{proxy}", "browser": LISTED}))
        proxied, site.seen[:] = list(site.seen), []
        direct = await shared.fetch(Request(base + "/about"))  # another context: no proxy
    assert len(response.css("li.gig")) == site.per_page
    assert {seen.path for seen in proxied if "tinyproxy" in seen.via} == {
        "/",
        "/static/app.js",
        "/static/style.css",
        "/track.js",
        "/api/gigs",
    }
    assert direct.css("h1::text").get() == "About us" and {seen.via for seen in site.seen} == {""}


async def test_a_refused_connection_is_a_connect_error(shared: BrowserFetcher) -> None:
    port = free_port()  # nobody listens there
    with pytest.raises(ConnectError, match=rf"cannot connect to http://127\.0\.0\.1:{port}/: ERR_CONNECTION_REFUSED"):
        await shared.fetch(Request(f"http://127.0.0.1:{port}/"))


async def test_a_page_that_never_finishes_fails_as_a_timeout_with_a_screenshot(base: str) -> None:
    class BoxOffice(Spider):
        name = "box-office"
        start_urls = [base + "/slow"]
        browser = {"actions": [{"wait_for": ".done"}], "timeout": 1}  # the API answers after 2 s
        fetcher = "browser"

        def parse(self, response: Response) -> Any:
            yield {"status": response.css("#status::text").get()}

    items, stats = await collect(BoxOffice, settings=Settings(store="", retries=0))
    assert items == [] and stats.failed_by_reason == {"timeout": 1}
    [failure] = read_jsonl(record_file("box-office", "failures"))
    # the step that ran out of the 1 s is named: the wait for '.done', or (a loaded machine) the navigation itself
    assert any(f"{step} not done within 1s" in failure["error"] for step in ("wait_for '.done'", "navigation"))
    shot = Path(failure["error"].rpartition("(screenshot: ")[2].rstrip(")"))
    assert shot.parent == Path("eclaw-data/box-office/screenshots")
    assert read_bytes(shot).startswith(b"\x89PNG") and len(read_bytes(shot)) > 1000


async def test_actions_survive_a_paused_crawl(tmp_path: Path, shared: BrowserFetcher) -> None:
    settings = {"checkpoint_interval": 0.1, "concurrency": 1}  # one page at a time: a pause leaves some for later
    site = GigSite(pages=2)

    async def crawl(base: str, pause_after: int | None) -> Any:
        fetcher = functools.partial(borrowing, shared)  # the actions are the crawl's to keep, whoever renders
        engine = Engine(Settings(store=""), state_dir=tmp_path / "state", overrides=settings, fetcher=fetcher)
        seen = 0

        async def pause(event: ItemStored) -> None:
            nonlocal seen
            seen += 1
            if seen == pause_after:
                engine.stop("paused by the test")

        engine.subscribe(ItemStored, pause)
        return await collect(Gigs, engine=engine, base_url=base)

    async with serve(site.app()) as base:
        first, stats = await crawl(base, pause_after=2)
        assert stats.finish_reason == "paused by the test" and stats.requests_pending
        rest, stats = await crawl(base, pause_after=None)
    assert stats.finish_reason == "finished"
    done = first + rest
    assert sorted(item["url"] for item in done) == sorted(f"{base}/gig/{n}" for n in range(1, site.gigs + 1))
    assert rest and all(item["tickets"] == ["standing", "balcony"] for item in rest)  # the resumed ones clicked too


async def test_a_crashed_browser_is_launched_again(base: str, launched: tuple[BrowserFetcher, int]) -> None:
    fetcher, pid = launched  # a browser of the module: the tests after this one (none in file order) get the new one
    await fetcher.fetch(Request(base + "/about"))
    others = set(chromium_pids()) - {pid}  # the other browsers of the module
    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ConnectError):  # if the loss is not yet known, a lost connection (retried)
        await fetcher.fetch(Request(base + "/about"))
    response = await fetcher.fetch(Request(base + "/about"))
    assert response.css("h1::text").get() == "About us"
    assert pid not in chromium_pids() and len(_roots(set(chromium_pids()) - others)) == 1


def chromium_pids() -> list[int]:
    """The browsers this process started (Playwright talks to them over --remote-debugging-pipe)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        if b"--remote-debugging-pipe" in command and _descends_from_us(int(entry.name)):
            found.append(int(entry.name))
    return found


def _roots(pids: set[int]) -> list[int]:
    """The browsers among ``pids``, not a process a browser is forking: until it runs a program of its own,
    a child shows its parent's command line (seen on a loaded machine: two "browsers" for one launch)."""
    return [pid for pid in pids if _parent(pid) not in pids]


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _descends_from_us(pid: int) -> bool:
    while pid > 1:
        if pid == os.getpid():
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rpartition(")")[2].split()[1])
    return False
