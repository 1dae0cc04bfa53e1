"""Facts from Scrapy's own test suite (redirects, offsite, start requests, referrer policy, rules,
forms), re-expressed against eclaw's public API and local servers.

Each test names the Scrapy behaviour it checks; where eclaw differs on purpose, docs/scrapy.md says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.discovery.links import Rule
from eclaw.events import RequestDropped
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, recorder
from tests.rawsite import RawSite

Answer = Callable[[web.Request], web.StreamResponse]
HTML = "text/html"


class Site:
    """A local site: ``answer(request)`` for every path; each request kept as (method, path, headers, body)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.read() if request.method == "POST" else b""
            self.seen.append((request.method, request.path_qs, dict(request.headers), body))
            return self.answer(request)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        return app

    @property
    def paths(self) -> list[str]:
        return [path for _, path, _, _ in self.seen]

    def headers_of(self, path: str) -> dict[str, str]:
        return next(headers for _, seen, headers, _ in self.seen if seen == path)


def page(*links: str, head: str = "", headers: dict[str, str] | None = None) -> web.Response:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return web.Response(
        text=f"<html><head>{head}</head><body>{anchors}</body></html>", content_type=HTML, headers=headers
    )


def moved(location: str, status: int = 302) -> web.Response:
    return web.Response(status=status, headers={"Location": location})


class Urls(Spider):
    """Fetches what ``start_requests`` names (given as ``requests``: Requests, not start URLs) and
    the links of ``follow`` pages; each page parsed is an item."""

    name = "urls"
    requests: list[Request] = []  # given per crawl
    follow = False

    async def start_requests(self) -> Any:
        for request in self.requests:
            yield request

    def parse(self, response: Response) -> Any:
        yield {"url": response.url, "asked": response.request.url}
        if self.follow:
            yield from response.follow_all(css="a")


async def crawl(
    spider: type[Spider], settings: Settings | None = None, **args: Any
) -> tuple[list[Any], Any, list[Any]]:
    engine = Engine(settings)
    dropped: list[RequestDropped] = []
    engine.subscribe(RequestDropped, recorder(dropped))
    items, stats = await collect(spider, engine=engine, **args)
    assert_accounted(stats)
    return items, stats, dropped


# -- every redirect hop passes the checks of a new request -----------------------------------------


async def test_a_redirect_hop_obeys_the_robots_txt_of_its_host_fetched_first() -> None:
    """Scrapy's redirects are new requests, so RobotsTxtMiddleware vets each hop (its robots.txt first)."""

    def robots() -> web.Response:
        return web.Response(text="User-agent: *\nDisallow: /private\n", content_type="text/plain")

    far = Site(lambda r: robots() if r.path == "/robots.txt" else page())
    async with serve(far.app(), host="127.0.0.2") as far_url:
        hops = {"/to-private": "/private", "/to-far": far_url + "/private", "/to-far-ok": far_url + "/open"}
        home = Site(
            lambda r: robots() if r.path == "/robots.txt" else moved(hops[r.path]) if r.path in hops else page()
        )
        async with serve(home.app()) as base:
            requests = [Request(base + path) for path in hops]
            items, stats, dropped = await crawl(Urls, Settings(obey_robots=True), requests=requests)
    assert "/private" not in home.paths  # a hop to a disallowed page is never fetched...
    assert far.paths == ["/robots.txt", "/open"]  # ...on another host either: its robots.txt comes first
    assert stats.dropped_by_reason == {"robots": 2}  # the reason a new request would get
    assert sorted(d.request.url for d in dropped) == [base + "/to-far", base + "/to-private"]
    assert [item["url"] for item in items] == [far_url + "/open"]


async def test_a_redirect_hop_to_a_url_too_long_is_dropped_as_a_new_request_would_be() -> None:
    long_path = "/" + "x" * 200
    home = Site(lambda r: moved(long_path) if r.path == "/to-long" else page())
    async with serve(home.app()) as base:
        _, stats, _ = await crawl(Urls, Settings(max_url_length=120), requests=[Request(base + "/to-long")])
    assert home.paths == ["/to-long"]
    assert stats.dropped_by_reason == {"url too long": 1}


# -- a POST (or a GET with a body) redirected as a GET drops its body's headers --------------------


async def test_a_post_redirected_as_a_get_drops_the_headers_of_its_body() -> None:
    """Scrapy's test_post / test_redirect_303: the GET keeps neither Content-Type nor Content-Length."""
    targets = {"/post-302": "/got-302", "/post-301": "/got-301", "/get-303": "/got-303", "/post-307": "/got-307"}
    status = {"/post-302": 302, "/post-301": 301, "/get-303": 303, "/post-307": 307}
    site = Site(lambda r: moved(targets[r.path], status[r.path]) if r.path in targets else page())
    body_headers = {"Content-Type": "text/plain", "Content-Length": "4", "Content-Language": "en", "X-Mine": "1"}
    async with serve(site.app()) as base:
        requests = [
            Request(base + path, method="GET" if path.startswith("/get") else "POST", body="test", headers=body_headers)
            for path in targets
        ]
        items, _, _ = await crawl(Urls, requests=requests)
    for path in ("/got-302", "/got-301", "/got-303"):
        method, _, headers, body = next(s for s in site.seen if s[1] == path)
        assert (method, body) == ("GET", b""), path
        assert "Content-Type" not in headers and "Content-Language" not in headers, (path, headers)
        assert headers.get("Content-Length", "0") == "0", (path, headers)
        assert headers["X-Mine"] == "1"  # the request's other headers stay
    method, _, headers, body = next(s for s in site.seen if s[1] == "/got-307")
    assert (method, body, headers["Content-Type"]) == ("POST", b"test", "text/plain")  # 307 keeps it all
    assert len(items) == 4


# -- offsite: dont_filter, allow_offsite, start requests, ports --------------------------------------


class Local(Urls):
    allowed_domains = ["127.0.0.1"]


async def test_dont_filter_and_allow_offsite_requests_may_leave_the_allowed_domains() -> None:
    """Scrapy's OffsiteMiddleware skips a request with dont_filter or meta["allow_offsite"] (2.11.2+), and
    a redirect keeps both."""
    far = Site(lambda r: page())
    async with serve(far.app(), host="127.0.0.2") as far_url:
        home = Site(lambda r: moved(far_url + r.path.replace("/away", "/landing")))
        async with serve(home.app()) as base:
            requests = [
                Request(base + "/away1"),
                Request(base + "/away2", dont_filter=True),
                Request(base + "/away3", meta={"allow_offsite": True}),
                Request(far_url + "/direct", meta={"allow_offsite": True}),
                Request(far_url + "/plain"),
                Request(far_url + "/plain", meta={"allow_offsite": True}),  # refused just before: not by its URL
            ]
            items, stats, _ = await crawl(Local, requests=requests)
    assert sorted(far.paths) == ["/direct", "/landing2", "/landing3", "/plain"]
    assert stats.dropped_by_reason == {"offsite redirect": 1, "offsite": 1}
    assert sorted(item["url"] for item in items) == [
        far_url + p for p in ("/direct", "/landing2", "/landing3", "/plain")
    ]


class Starts(Spider):
    name = "starts"
    allowed_domains = ["127.0.0.1"]

    def parse(self, response: Response) -> Any:
        yield {"url": response.url}
        yield from response.follow_all(css="a")


async def test_start_urls_are_dont_filter_as_in_scrapy_but_their_links_are_not() -> None:
    """Scrapy's start_urls become Request(url, dont_filter=True): an offsite start URL is fetched, one
    listed twice is fetched twice. A link back to a start URL later is a duplicate in eclaw."""
    far = Site(lambda r: page("/next"))
    async with serve(far.app(), host="127.0.0.2") as far_url:
        home = Site(lambda r: page("/", "/a") if r.path == "/" else page("/"))
        async with serve(home.app()) as base:
            start_urls = [base + "/", base + "/", far_url + "/b"]
            _, _, dropped = await crawl(Starts, start_urls=start_urls)
    assert sorted(home.paths) == ["/", "/", "/a"]
    assert far.paths == ["/b"]  # the start URL off the allowed domains; not its link
    assert {(d.request.url, d.reason) for d in dropped} == {
        (base + "/", "duplicate"),  # a link back to a start URL
        (base + "/a", "duplicate"),
        (far_url + "/next", "offsite"),
    }


async def test_an_allowed_domains_entry_with_a_port_is_named_and_its_port_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Scrapy warns (PortWarning) for an allowed_domains entry with a port; eclaw names it too, and
    allows the host on any port (docs/scrapy.md)."""
    home = Site(lambda r: page("/next"))
    async with serve(home.app()) as base:

        class Ported(Starts):
            allowed_domains = ["127.0.0.1:1"]

        with caplog.at_level(logging.WARNING, logger="eclaw.spider"):
            await crawl(Ported, start_urls=[base + "/"])
    assert sorted(home.paths) == ["/", "/next"]
    assert "allowed_domains entry '127.0.0.1:1': ports are ignored" in caplog.text


async def test_allowed_domains_are_read_when_the_crawl_opens_as_in_scrapy() -> None:
    """Scrapy's OffsiteMiddleware compiles allowed_domains on spider_opened: a change later is not seen."""
    far = Site(lambda r: page())
    async with serve(far.app(), host="127.0.0.2") as far_url:

        class Widening(Spider):
            name = "widening"
            allowed_domains = ["127.0.0.1"]

            def parse(self, response: Response) -> Any:
                self.allowed_domains = ["127.0.0.1", "127.0.0.2"]
                yield Request(far_url + "/later")

        home = Site(lambda r: page())
        async with serve(home.app()) as base:
            _, stats, _ = await crawl(Widening, start_urls=[base + "/"])
    assert far.paths == [] and stats.dropped_by_reason == {"offsite": 1}


# -- Location headers ----------------------------------------------------------------------------


async def test_a_location_in_latin1_or_utf8_and_one_of_three_slashes_are_read_as_scrapy_reads_them() -> None:
    """Scrapy's test_latin1_location, test_utf8_location and test_redirect_302_relative (///host/path)."""
    ok = (200, {"Content-Type": HTML}, b"<title>ok</title>")
    site = RawSite(
        {
            "/latin1": (302, {"Location": "/a\udce7\udce3o"}, b""),  # the bytes of "/ação" in Latin-1
            "/utf8": (302, {"Location": "/a\u00e7\u00e3o"}, b""),
            "/a%E7%E3o": ok,
            "/a%C3%A7%C3%A3o": ok,
            "/landing": ok,
        }
    )
    async with site.serve() as base:
        site.routes["/triple"] = (302, {"Location": "///" + base.partition("://")[2] + "/landing"}, b"")
        requests = [Request(base + path) for path in ("/latin1", "/utf8", "/triple")]
        items, stats, _ = await crawl(Urls, requests=requests)
    assert {item["asked"]: item["url"] for item in items} == {
        base + "/latin1": base + "/a%E7%E3o",
        base + "/utf8": base + "/a%C3%A7%C3%A3o",
        base + "/triple": base + "/landing",
    }
    assert stats.requests_failed == 0


# -- Referrer-Policy -----------------------------------------------------------------------------


async def test_the_referer_follows_the_referrer_policy_of_the_page_or_the_request() -> None:
    """Scrapy's RefererMiddleware: meta["referrer_policy"], else the page's Referrer-Policy, else
    no-referrer-when-downgrade; eclaw reads <meta name="referrer"> too, as browsers do."""
    far = Site(lambda r: page())
    async with serve(far.app(), host="127.0.0.2") as far_url:

        def answer(request: web.Request) -> web.Response:
            if request.path == "/h-origin":
                return page("/t1", headers={"Referrer-Policy": "origin"})
            if request.path == "/m-none":  # the page's <meta> wins over its header
                return page(
                    "/t2",
                    head='<meta name="referrer" content="no-referrer">',
                    headers={"Referrer-Policy": "unsafe-url"},
                )
            if request.path == "/h-list":  # the last policy known of a list
                return page(
                    far_url + "/t3",
                    "/t4",
                    headers={"Referrer-Policy": "no-referrer, strict-origin-when-cross-origin, bogus"},
                )
            if request.path == "/default":
                return page("/t6")
            return page()

        home = Site(answer)

        class Policies(Spider):
            name = "policies"

            def parse(self, response: Response) -> Any:
                yield from response.follow_all(css="a")
                if response.url.endswith("/default"):  # the request's own policy wins over the page's
                    yield Request(far_url + "/t5", meta={"referrer_policy": "same-origin"})

        async with serve(home.app()) as base:
            await crawl(Policies, start_urls=[base + p for p in ("/h-origin", "/m-none", "/h-list", "/default")])
    referers = {path: headers.get("Referer") for _, path, headers, _ in home.seen + far.seen if "/t" in path}
    assert referers == {
        "/t1": base + "/",
        "/t2": None,
        "/t3": base + "/",
        "/t4": base + "/h-list",
        "/t5": None,
        "/t6": base + "/default",
    }


# -- rules and forms -----------------------------------------------------------------------------


async def test_a_rule_takes_a_single_host_for_allow_domains() -> None:
    """Scrapy's LinkExtractor takes allow_domains through arg_to_iter: one string is one host."""
    far = Site(lambda r: page())
    async with serve(far.app(), host="127.0.0.2") as far_url:
        home = Site(lambda r: page("/a", far_url + "/b") if r.path == "/" else page())
        rule = Rule(allow_domains="127.0.0.1", strategy="any")  # any host, but the one allowed

        class Ruled(Spider):
            name = "ruled"
            rules = [rule]

        async with serve(home.app()) as base:
            await crawl(Ruled, start_urls=[base + "/"])
    assert sorted(home.paths) == ["/", "/a"] and far.paths == []


async def test_from_form_refuses_formdata_that_is_not_pairs_with_a_value_error() -> None:
    """Scrapy's FormRequest raises ValueError for a formdata neither a dict nor (name, value) pairs."""
    form = '<form action="/search"><input name="q" value="x"></form>'
    home = Site(lambda r: web.Response(text=form, content_type=HTML))

    class Forms(Spider):
        name = "forms"

        def parse(self, response: Response) -> Any:
            if response.url.endswith("/search?q=1"):
                yield {"searched": response.url}
                return
            for formdata in (123, "q=1", [("q",)]):
                try:
                    Request.from_form(response, formdata=formdata)  # type: ignore[arg-type]
                except ValueError as exc:
                    yield {"refused": repr(formdata), "error": str(exc)}
            yield Request.from_form(response, formdata=[("q", "1")])

    async with serve(home.app()) as base:
        items, _, _ = await crawl(Forms, start_urls=[base + "/"])
    assert [item.get("refused") for item in items[:3]] == ["123", "'q=1'", "[('q',)]"]
    assert all("formdata must be a dict or (name, value) pairs" in item["error"] for item in items[:3])
    assert items[3] == {"searched": base + "/search?q=1"}
