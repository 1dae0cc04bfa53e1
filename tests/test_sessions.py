"""Cookies and sessions against local sites: two accounts in one crawl, a login kept across a pause,
a session pool whose banned sessions are retired, basic auth that stays on its host, the Referer,
dont_redirect, and a session's cookies handed to another fetcher."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import ConfigError, Engine, Request, Response, Settings, Spider
from eclaw.events import ItemStored
from eclaw.fetchers.hops import referer_for
from eclaw.fetchers.plain import PlainFetcher
from eclaw.fetchers.router import Fetchers
from eclaw.middlewares import Sessions, defaults
from eclaw.sessions.jars import CookieJars
from eclaw.testing import MockFetcher, collect, serve
from tests.conftest import assert_accounted
from tests.sessionsite import ACCOUNTS, Catalogue, Notebook, echo_app

QUIET = Settings(store="", retries=0)


class Members(Spider):
    """Signs in as every member at once, each in a cookie jar of its own, and reads their notes."""

    name = "members"
    accounts = ACCOUNTS
    base = ""

    async def start_requests(self) -> AsyncIterator[Request]:
        for user in self.accounts:
            yield Request(self.base + "/login", meta={"cookiejar": user}, cb_kwargs={"user": user})

    def parse(self, response: Response, user: str) -> Any:
        credentials = {"user": user, "password": self.accounts[user]}
        yield Request.from_form(response, credentials, meta={"cookiejar": user}, callback=self.notebook)

    def notebook(self, response: Response) -> Any:
        jar = response.meta["cookiejar"]
        yield from response.follow_all(css="a.note", callback=self.note, meta={"cookiejar": jar})
        yield from response.follow_all(css="a.next", callback=self.notebook, meta={"cookiejar": jar})

    def note(self, response: Response) -> Any:
        yield {
            "jar": response.meta["cookiejar"],
            "who": response.css(".who::text").get(),
            "text": response.css(".text::text").get(),
        }


async def test_two_accounts_in_one_crawl_each_in_its_own_jar() -> None:
    site = Notebook(notes=7, per_page=3)
    async with serve(site.app()) as base:
        items, stats = await collect(Members, settings=QUIET, base=base)
    for user in ACCOUNTS:
        mine = [item for item in items if item["jar"] == user]
        assert {item["who"] for item in mine} == {user}  # each jar sees its own member's pages only
        assert sorted(item["text"] for item in mine) == sorted(site.notes[user])
    assert site.logins == {"alice": 1, "bob": 1} and site.csrf_failures == 0 and site.anonymous == 0
    assert stats.requests_failed == 0
    assert_accounted(stats)


async def test_cookies_of_a_request_are_sent_and_kept_in_its_jar() -> None:
    async with serve(echo_app()) as base:
        fetcher = PlainFetcher()
        await fetcher.open(Members(), Settings())
        try:
            await fetcher.fetch(Request(base + "/set?theme=dark"))
            first = (await fetcher.fetch(Request(base + "/echo", cookies={"lang": "fr"}))).json()
            later = (await fetcher.fetch(Request(base + "/echo?again"))).json()
            other = (await fetcher.fetch(Request(base + "/echo?jar", meta={"cookiejar": 2}))).json()
            given = (await fetcher.fetch(Request(base + "/echo?own", headers={"Cookie": "debug=1"}))).json()
        finally:
            await fetcher.close()
    assert first["cookies"] == {"theme": "dark", "lang": "fr"}
    assert later["cookies"] == {"theme": "dark", "lang": "fr"}  # kept in the default jar
    assert other["cookies"] == {}  # another jar: nothing of the default one
    assert given["cookies"] == {"theme": "dark", "lang": "fr", "debug": "1"}  # the request's own header merged


async def test_with_cookies_off_nothing_is_kept_but_a_requests_own_cookies_are_sent() -> None:
    async with serve(echo_app()) as base:
        fetcher = PlainFetcher()
        await fetcher.open(Members(), Settings(cookies=False))
        try:
            await fetcher.fetch(Request(base + "/set?theme=dark"))
            own = (await fetcher.fetch(Request(base + "/echo", cookies={"lang": "fr"}))).json()
            later = (await fetcher.fetch(Request(base + "/echo?again"))).json()
        finally:
            await fetcher.close()
    assert own["cookies"] == {"lang": "fr"} and later["cookies"] == {}


async def test_a_login_that_sends_you_back_to_the_page_you_started_at() -> None:
    site = Notebook(notes=2)

    class Bounced(Spider):
        name = "bounced"

        async def start_requests(self) -> AsyncIterator[Request]:
            yield Request(self.base + "/notes", callback=self.bounced)  # not signed in: sent to /login

        def bounced(self, response: Response) -> Any:
            assert response.meta["redirect_urls"] == [self.base + "/notes"]
            credentials = {"user": "bob", "password": ACCOUNTS["bob"]}
            yield Request.from_form(response, credentials, callback=self.notebook)  # answered with /notes again

        def notebook(self, response: Response) -> Any:
            yield from response.follow_all(css="a.note", callback=self.note)

        def note(self, response: Response) -> Any:
            yield {"text": response.css(".text::text").get()}

    async with serve(site.app()) as base:
        items, stats = await collect(Bounced, settings=QUIET, base=base)
    assert sorted(item["text"] for item in items) == sorted(site.notes["bob"])
    assert stats.dropped_by_reason["duplicate"] == 0
    assert_accounted(stats)


def test_which_cookies_a_url_gets_and_the_jars_saved_and_restored() -> None:
    jars = CookieJars()
    jars.store("a", "http://shop.test/", ["sid=1; Path=/", "deep=2; Path=/account", "old=3; Max-Age=0"])
    jars.store("a", "http://shop.test/", ["wide=4; Domain=shop.test; Path=/"])
    jars.store("a", "https://shop.test/", ["safe=5; Secure; Path=/; HttpOnly"])
    jars.store("b", "http://localhost:8080/x/y", ["local=6"])

    def headers(saved: CookieJars) -> list[str | None]:
        return [
            saved.header("a", "http://shop.test/p?q=1"),
            saved.header("a", "https://shop.test/account/orders"),  # the longest path first
            saved.header("a", "http://www.shop.test/"),  # a subdomain: the domain cookie only
            saved.header("a", "http://shop.test/accounting"),  # /account is not a prefix of this path
            saved.header("b", "http://localhost:8080/x/z"),
            saved.header("b", "http://localhost:8080/"),  # outside the default path /x
            saved.header("a", "http://other.test/"),
            saved.header("c", "http://shop.test/"),  # a jar never used
        ]

    expected = [
        "sid=1; wide=4",
        "deep=2; sid=1; safe=5; wide=4",
        "wide=4",
        "sid=1; wide=4",
        "local=6",
        None,
        None,
        None,
    ]
    assert headers(jars) == expected
    restored = CookieJars()
    restored.restore(json.loads(json.dumps(jars.checkpoint())))  # as --state writes it
    assert headers(restored) == expected
    assert restored.cookies("a", "https://shop.test/") == {"sid": "1", "wide": "4", "safe": "5"}
    restored.drop("a")
    assert restored.header("a", "http://shop.test/") is None


async def test_a_paused_crawl_resumes_logged_in(tmp_path: Path) -> None:
    site = Notebook(notes=30, per_page=5, delay=0.01)

    class Alice(Members):
        accounts = {"alice": ACCOUNTS["alice"]}

    async def run(stop_after: int | None) -> Any:
        engine = Engine(
            outputs=[str(tmp_path / "notes.jsonl")],
            state_dir=tmp_path / "state",
            overrides={"store": "", "checkpoint_interval": 0.1, "concurrency": 2},
        )
        stored = 0

        def count(event: ItemStored) -> None:
            nonlocal stored
            stored += 1
            if stored == stop_after:
                engine.stop("paused by the test")

        engine.subscribe(ItemStored, count)
        async with engine:
            return await engine.crawl(Alice, base=base)

    async with serve(site.app()) as base:
        first = await run(stop_after=8)
        assert first.finish_reason == "paused by the test" and first.requests_pending
        second = await run(stop_after=None)
    assert second.finish_reason == "finished"
    lines = (tmp_path / "notes.jsonl").read_text().splitlines()
    assert len(lines) == 30 and all('"who": "alice"' in line for line in lines)
    assert site.logins == {"alice": 1}  # the jar came back with the crawl: no second login
    assert site.anonymous == 0  # and no page was asked for without the session
    assert_accounted(second)


class Shelves(Spider):
    name = "shelves"
    custom_settings = {"concurrency": 1, "store": "", "retries": 0}  # one at a time: who is banned when is exact
    middlewares = [Sessions(2, ban_pattern="verify you are human", user_agents=[f"Reader/{n}" for n in range(1, 6)])]

    def parse(self, response: Response) -> Any:
        yield {"shelf": response.css("h1.shelf::text").get(), "session": response.meta["session"]}
        yield from response.follow_all(css="a")


async def test_a_banned_session_is_retired_and_its_requests_tried_on_a_fresh_one() -> None:
    site = Catalogue(shelves=30, ban=1, captcha=2, after=3)
    async with serve(site.app()) as base:
        items, stats = await collect(Shelves, start_urls=[base + "/shelf/0"])
    assert sorted(item["shelf"] for item in items) == sorted(f"Shelf {n}" for n in range(30))  # every page
    assert stats.requests_failed == 0
    assert set(site.banned) == {1, 2}  # one banned by a 403, one shown a captcha
    assert stats.counters["sessions banned"] == 2
    for visitor, at in site.banned.items():
        assert all(seen[0] != visitor for seen in site.seen[at:])  # its cookie never sent again
    assert all(len(agents) == 1 for agents in site.user_agents.values())  # a session keeps its user agent
    assert len({next(iter(agents)) for agents in site.user_agents.values()}) == site.visitors  # each its own
    assert stats.retries == 2  # the two banned responses, tried again on fresh sessions
    assert_accounted(stats)


async def test_the_session_pool_comes_back_with_a_resumed_crawl(tmp_path: Path) -> None:
    site = Catalogue(shelves=40, ban=1, captcha=0, after=3)

    async def run(stop_after: int | None) -> Any:
        engine = Engine(state_dir=tmp_path / "state", overrides={"checkpoint_interval": 0.05})
        stored = 0

        def count(event: ItemStored) -> None:
            nonlocal stored
            stored += 1
            if stored == stop_after:
                engine.stop("paused by the test")

        engine.subscribe(ItemStored, count)
        async with engine:
            return await engine.crawl(Shelves, start_urls=[base + "/shelf/0"])

    async with serve(site.app()) as base:
        first = await run(stop_after=12)
        known = site.visitors  # the banned one, and the sessions live at the pause
        second = await run(stop_after=None)
    assert first.finish_reason == "paused by the test" and second.finish_reason == "finished"
    assert site.visitors == known  # the live sessions went on with their cookies: no new visitor
    assert second.items_stored == 40 and second.counters["sessions banned"] == 1
    assert_accounted(second)


async def test_a_request_banned_on_every_session_fails_after_max_rotations() -> None:
    mock = MockFetcher(lambda request: (403, "banned") if "403" in request.url else "<p>Access denied</p>")

    class Hopeless(Spider):
        name = "hopeless"
        start_urls = ["https://walled.test/403", "https://walled.test/page"]
        middlewares = [Sessions(2, ban_pattern="Access denied", max_rotations=3)]

        def parse(self, response: Response) -> Any:
            yield {"url": response.url}

    items, stats = await collect(Hopeless, settings=QUIET, engine=Engine(QUIET, fetcher=lambda: mock))
    assert items == []
    assert stats.failed_by_reason == {"http 403": 1, "banned": 1}
    tried = [r.meta["session"] for r in mock.requests if r.url.endswith("/403")]
    assert len(tried) == 4 and len(set(tried)) == 4  # the first session, then three fresh ones
    assert_accounted(stats)


async def test_the_sessions_setting_puts_the_pool_before_the_user_agent() -> None:
    names = [type(m).__name__ for m in defaults(Settings(sessions=3))]
    assert names.index("Sessions") < names.index("UserAgent")
    with pytest.raises(ConfigError, match="'sessions' must not be negative"):
        Settings(sessions=-1)


async def test_a_sessions_cookies_reach_another_fetcher_in_the_cookie_header() -> None:
    mock = MockFetcher({})

    class Handover(Spider):
        name = "handover"
        middlewares = [Sessions(1)]

        def parse(self, response: Response) -> Any:
            meta = {"session": response.meta["session"], "fetcher": "mock"}
            yield Request(response.urljoin("/elsewhere"), meta=meta, callback=self.done)

        def done(self, response: Response) -> Any:
            return []

    fetchers = Fetchers({"plain": PlainFetcher, "mock": lambda: mock})
    async with serve(echo_app()) as base:
        await collect(Handover, engine=Engine(QUIET, fetcher=lambda: fetchers), start_urls=[base + "/set?sid=s-1"])
    [handed] = mock.requests
    assert handed.headers["Cookie"] == "sid=s-1" and handed.meta["cookiejar"] == handed.meta["session"]


def two_hosts() -> tuple[web.Application, web.Application, list[str | None]]:
    """A private site on one host (basic auth) that links and redirects to a public one on another;
    the public one records every ``Authorization`` it is sent."""
    heard: list[str | None] = []
    private, public = web.Application(), web.Application()

    async def listen(request: web.Request) -> web.Response:
        heard.append(request.headers.get("Authorization"))
        return web.Response(text="<h1>public</h1>", content_type="text/html")

    public.router.add_get("/{tail:.*}", listen)

    async def page(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Basic YWxpY2U6czNjcmV0LXB3":  # alice:s3cret-pw
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})
        other = request.query["other"]
        links = f'<a href="{other}/linked">linked</a><a href="/hop?other={other}">hop</a>'
        return web.Response(text=f"<h1>private</h1>{links}", content_type="text/html")

    async def hop(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") is None:
            return web.Response(status=401)
        raise web.HTTPFound(request.query["other"] + "/redirected")

    private.router.add_get("/", page)
    private.router.add_get("/hop", hop)
    return private, public, heard


class Walker(Spider):
    name = "walker"

    def parse(self, response: Response) -> Any:
        yield {"url": response.url, "title": response.css("h1::text").get()}
        yield from response.follow_all(css="a")


@pytest.mark.parametrize("by", ["setting", "spider"])
async def test_basic_auth_goes_to_its_host_only_and_is_never_logged(
    by: str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    private, public, heard = two_hosts()
    caplog.set_level(logging.DEBUG)
    async with serve(private) as mine, serve(public) as theirs:
        other = theirs.replace("127.0.0.1", "localhost")  # another host name, same machine
        host = mine.removeprefix("http://")
        settings = Settings(store="", failures=str(tmp_path / "failures.jsonl"))
        if by == "setting":
            settings = settings.replace(http_auth=f"alice:s3cret-pw@{host}")
            items, stats = await collect(Walker, settings=settings, start_urls=[f"{mine}/?other={other}"])
        else:
            auth = {host: ("alice", "s3cret-pw")}
            items, stats = await collect(
                Walker, settings=settings, start_urls=[f"{mine}/?other={other}"], http_auth=auth
            )
    assert sorted(item["title"] for item in items) == ["private", "public", "public"]  # linked, and redirected to
    assert heard == [None, None]  # the other host never got the credentials, even through the redirect
    assert "s3cret" not in caplog.text and "s3cret" not in repr(settings)
    assert_accounted(stats)


def test_a_bad_http_auth_setting_names_the_entry_not_the_password() -> None:
    with pytest.raises(ConfigError) as error:
        Settings(http_auth="alice:ok@a.test,bob-no-password@b.test")
    assert str(error.value) == "setting 'http_auth': entry 2 must be USER:PASSWORD@HOST"


@pytest.mark.parametrize("referer", [True, False])
async def test_a_request_carries_the_page_it_was_found_on_as_its_referer(referer: bool) -> None:
    heard: dict[str, str | None] = {}
    app = web.Application()

    async def record(request: web.Request) -> web.Response:
        heard[request.path] = request.headers.get("Referer")
        return web.Response(text='<a href="/second#part">next</a>', content_type="text/html")

    app.router.add_get("/{tail:.*}", record)

    class Follower(Spider):
        name = "follower"

        def parse(self, response: Response) -> Any:
            yield from response.follow_all(css="a")

    async with serve(app) as base:
        await collect(Follower, settings=QUIET.replace(referer=referer), start_urls=[base + "/first?x=1"])
    assert heard == {"/first": None, "/second": base + "/first?x=1" if referer else None}


def test_the_referer_policy() -> None:
    assert referer_for("https://a.test/p", "http://b.test/") is None  # no downgrade
    assert referer_for("http://a.test/p", "https://b.test/") == "http://a.test/p"
    assert referer_for("https://u:pw@a.test/p?q=1#frag", "https://a.test/") == "https://a.test/p?q=1"


async def test_dont_redirect_hands_the_redirect_itself_to_the_callback() -> None:
    fetched: list[str] = []
    app = echo_app()

    @web.middleware
    async def log(request: web.Request, handler: Any) -> web.StreamResponse:
        fetched.append(request.path)
        return await handler(request)  # type: ignore[no-any-return]

    app.middlewares.append(log)

    class Stay(Spider):
        name = "stay"

        async def start_requests(self) -> AsyncIterator[Request]:
            yield Request(self.base + "/go?to=/echo", meta={"dont_redirect": True})

        def parse(self, response: Response) -> Any:
            yield {"status": response.status, "location": response.headers["Location"]}

    async with serve(app) as base:
        items, stats = await collect(Stay, settings=QUIET, base=base)
    assert items == [{"status": 302, "location": "/echo"}]
    assert fetched == ["/go"]
    assert_accounted(stats)
