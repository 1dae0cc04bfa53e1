"""Where a redirect leads counts as seen: a museum's catalogue whose objects are reached both by
direct links and through old URLs (301, 302, a meta refresh), in both orders, gives each object
once, with the in-memory and the Redis frontier; and how a meta refresh is followed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import Engine, IgnoreRequest, Request, Response, Settings, Spider
from eclaw.exceptions import RedirectLoop
from eclaw.fetchers.plain import PlainFetcher
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted

# Each object is reached once directly and once through an old URL. "direct first": the direct
# link is fetched first; "redirect first": the old URL is, and the direct link comes from a page
# fetched later; "queued": both are on the same page (the direct one is queued when the redirect lands).
OLD = {
    "/old/1": ("301", "/object/1"),  # direct first
    "/old/2": ("302", "/object/2"),  # redirect first
    "/old/3": ("refresh", "/object/3"),  # redirect first
    "/old/4": ("301", "/object/4"),  # queued
    "/old/5": ("refresh", "/object/5"),  # direct first
}
INDEX = ["/object/1", "/object/5", "/old/1", "/old/2", "/old/3", "/old/4", "/object/4", "/old/5", "/wing"]
WING = ["/object/2", "/object/3", "/object/6"]


def museum() -> tuple[web.Application, Counter[str]]:
    hits: Counter[str] = Counter()
    app = web.Application()

    def page(title: str, links: list[str], head: str = "") -> web.Response:
        anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
        text = f"<html><head>{head}<title>{title}</title></head><body><h1>{title}</h1>{anchors}</body></html>"
        return web.Response(text=text, content_type="text/html")

    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        hits[path] += 1
        if path == "/":
            return page("Museum", INDEX)
        if path == "/wing":
            return page("East wing", WING)
        if path in OLD:
            kind, target = OLD[path]
            if kind == "refresh":
                return page("Moved", [], f'<meta http-equiv="refresh" content="0; url={target}">')
            raise (web.HTTPMovedPermanently if kind == "301" else web.HTTPFound)(target)
        return page(f"Object {path.rsplit('/', 1)[1]}", ["/"])

    app.router.add_get("/{tail:.*}", handle)
    return app, hits


class Visitor(Spider):
    name = "visitor"

    def parse(self, response: Response) -> Any:
        title = response.css("h1::text").get("")
        if title.startswith("Object"):
            yield {"object": title, "url": response.url}
        yield from response.follow_all(css="a")


def check(base: str, items: list[dict[str, Any]], stats: Any) -> None:
    urls = Counter(item["url"] for item in items)
    assert sorted(urls) == [f"{base}/object/{n}" for n in range(1, 7)]
    assert set(urls.values()) == {1}  # each object once, whichever way it was reached
    assert stats.requests_failed == 0
    assert_accounted(stats)


async def test_a_page_reached_directly_and_through_redirects_is_parsed_once_in_either_order() -> None:
    app, hits = museum()
    async with serve(app) as base:
        items, stats = await collect(Visitor, settings=Settings(store="", concurrency=1), start_urls=[base + "/"])
    check(base, items, stats)
    assert stats.dropped_by_reason["duplicate"] >= 5 + 3  # the five old URLs' ends, three links back home
    assert hits["/object/2"] == hits["/object/3"] == 1  # redirected to first: the direct link later is a duplicate


async def test_concurrently_too() -> None:
    app, _ = museum()
    async with serve(app) as base:
        items, stats = await collect(Visitor, settings=Settings(store="", concurrency=8), start_urls=[base + "/"])
    check(base, items, stats)


async def test_with_the_redis_frontier(tmp_path: Path) -> None:
    from tests.cluster.servers import redis_server

    app, _ = museum()
    with redis_server(tmp_path) as server:
        async with serve(app) as base:
            settings = Settings(store="", concurrency=1, frontier_url=server.url)
            items, stats = await collect(Visitor, settings=settings, start_urls=[base + "/"])
    check(base, items, stats)


async def test_the_frontier_capability_directly() -> None:
    from eclaw.frontier.default import DefaultFrontier

    frontier = DefaultFrontier()
    await frontier.open(Visitor(), Settings(), lambda: None)
    assert await frontier.add_seen([Request("https://m.test/a"), Request("https://m.test/b")]) == [True, True]
    assert await frontier.enqueue([Request("https://m.test/a#x"), Request("https://m.test/c")]) == ["duplicate", None]
    assert await frontier.add_seen(
        [Request("https://m.test/c"), Request("https://m.test/a", meta={"cookiejar": 1})]
    ) == [
        False,
        True,  # the same URL in another cookie jar is another page
    ]
    await frontier.close()


REFRESHES = {
    "/now": '<meta http-equiv="refresh" content="0; url=/landing">',
    "/Later": "<META HTTP-EQUIV=Refresh CONTENT=\"30;URL='/landing?from=later'\">",
    "/too-late": '<meta http-equiv="refresh" content="600; url=/landing">',
    "/itself": '<meta http-equiv="refresh" content="5; url=/itself">',
    "/away": '<meta http-equiv="refresh" content="0; url=http://elsewhere.invalid/">',
    "/ping": '<meta http-equiv="refresh" content="0; url=/pong">',
    "/pong": '<meta http-equiv="refresh" content="0; url=/ping">',
    "/scripted": '<script>document.write(\'<meta http-equiv="refresh" content="0; url=/landing">\')</script>',
}


@pytest.fixture
async def refresh_site() -> Any:
    methods: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        methods.append(f"{request.method} {request.path}")
        head = REFRESHES.get(request.path, "")
        text = f"<html><head>{head}</head><body><h1>{request.path}</h1></body></html>"
        return web.Response(text=text, content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    async with serve(app) as base:
        yield base, methods


class Local(Spider):
    name = "local"
    allowed_domains = ["127.0.0.1"]


async def fetch(base: str, path: str, settings: Settings | None = None, **kwargs: Any) -> Response:
    fetcher = PlainFetcher()
    await fetcher.open(Local(), settings or Settings())
    try:
        return await fetcher.fetch(Request(base + path, **kwargs))
    finally:
        await fetcher.close()


async def test_a_meta_refresh_is_followed_as_a_redirect_hop(refresh_site: Any) -> None:
    base, methods = refresh_site
    response = await fetch(base, "/now")
    assert response.url == base + "/landing" and response.meta["redirect_urls"] == [base + "/now"]
    assert (await fetch(base, "/Later")).url == base + "/landing?from=later"
    posted = await fetch(base, "/now", method="POST", body=b"x=1")
    assert posted.url == base + "/landing" and methods[-2:] == ["POST /now", "GET /landing"]


@pytest.mark.parametrize(
    ("path", "settings", "meta"),
    [
        ("/too-late", Settings(), {}),  # over meta_refresh_max_delay (100 s)
        ("/Later", Settings(meta_refresh_max_delay=10), {}),
        ("/itself", Settings(), {}),  # a refresh of the page itself
        ("/scripted", Settings(), {}),  # inside a script: not a refresh
        ("/now", Settings(meta_refresh=False), {}),
        ("/now", Settings(), {"dont_redirect": True}),
    ],
)
async def test_a_meta_refresh_that_is_not_followed(
    refresh_site: Any, path: str, settings: Settings, meta: dict[str, Any]
) -> None:
    base, _ = refresh_site
    response = await fetch(base, path, settings, meta=meta)
    assert response.url == base + path and "redirect_urls" not in response.meta


async def test_a_meta_refresh_offsite_or_in_a_loop_is_caught(refresh_site: Any) -> None:
    base, _ = refresh_site
    with pytest.raises(IgnoreRequest, match="offsite redirect"):
        await fetch(base, "/away")
    with pytest.raises(RedirectLoop):
        await fetch(base, "/ping")


async def test_a_redirects_end_is_dropped_as_a_duplicate_with_its_reason() -> None:
    app, _ = museum()
    async with serve(app) as base:
        engine = Engine(Settings(store="", concurrency=1))
        items, stats = await collect(Visitor, engine=engine, start_urls=[base + "/"])
    assert stats.dropped_by_reason.keys() == {"duplicate"}  # a redirected duplicate is an ordinary duplicate
    assert len(items) == 6


async def test_the_links_of_one_follow_all_with_meta_each_keep_their_own_meta() -> None:
    """The requests one ``follow_all(meta=...)`` makes each have their own meta (they shared one
    dict): a value set on one is not on the others, and a redirect's ``redirect_urls`` is its own."""
    app = web.Application()

    async def listing(request: web.Request) -> web.Response:
        links = "".join(f'<a href="{path}">{path}</a>' for path in ("/moved", "/stays-1", "/stays-2"))
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/landed")

    async def item(request: web.Request) -> web.Response:
        return web.Response(text=f"<html><title>{request.path}</title></html>", content_type="text/html")

    app.router.add_get("/", listing)
    app.router.add_get("/moved", moved)
    for path in ("/landed", "/stays-1", "/stays-2"):
        app.router.add_get(path, item)

    class Listing(Spider):
        name = "listing"
        start_urls: list[str] = []

        def parse(self, response: Response) -> Any:
            for rank, request in enumerate(response.follow_all(css="a", callback=self.parse_item, meta={"from": "x"})):
                request.meta["rank"] = rank  # as a spider numbers what it follows
                yield request

        def parse_item(self, response: Response) -> Any:
            meta = response.meta
            yield {"url": response.url, "from": meta["from"], "rank": meta["rank"], "hops": meta.get("redirect_urls")}

    async with serve(app) as base:
        items, _ = await collect(Listing, start_urls=[base + "/"], settings=Settings(concurrency=1))
    by_url = {item["url"].removeprefix(base): item for item in items}
    assert by_url["/landed"]["hops"] == [base + "/moved"]
    assert (by_url["/stays-1"]["hops"], by_url["/stays-2"]["hops"]) == (None, None)
    assert [by_url[path]["rank"] for path in ("/landed", "/stays-1", "/stays-2")] == [0, 1, 2]
    assert {item["from"] for item in items} == {"x"}
