"""Cookies by the rules browsers use, against real servers: tenants of public suffixes
(``github.io``, ``co.uk``, ``herokuapp.com``) answered by a local virtual-host proxy, https and
http on one host, a session pool, and an HTTP cache that never hands one identity's page to
another; plus the cookies a request brings that are malformed (Scrapy's facts)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import Request, Response, Settings, Spider
from eclaw.fetchers.plain import PlainFetcher
from eclaw.sessions.jars import CookieJars
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted
from tests.security.vhosts import Heard, page, site, tls_and_plain, virtual_hosts

QUIET = Settings(store="", retries=0, concurrency=1)
TLS = Settings(store="", retries=0, concurrency=1, verify_tls=False)  # the test server's certificate is self-signed


class Walker(Spider):
    """Follows every link and form, one page at a time; an item per page: its URL and the
    ``Cookie`` header the site says it got."""

    name = "walker"

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url, "cookie": response.css("#cookie::text").get() or ""}
        yield from response.follow_all(css="a")
        if response.css("form"):
            yield Request.from_form(response)


def proxied(proxy: str) -> Settings:
    """Every request through ``proxy`` (the virtual hosts), one at a time."""
    return Settings(store="", retries=0, concurrency=1, proxies=proxy)


# -- public suffixes -----------------------------------------------------------------------


async def test_a_cookie_for_all_of_github_io_never_reaches_another_tenant(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="eclaw")
    async with virtual_hosts() as sites:
        start = page(
            "http://alice.github.io/",
            cookies=["sid=alice-secret; Domain=github.io; Path=/", "own=alice-own; Path=/"],
            links=["http://bob.github.io/", "http://alice.github.io/again"],
        )
        items, stats = await collect(Walker, settings=proxied(sites.proxy), start_urls=[start])
    assert sites.cookies("bob.github.io") == [None]  # bob, a neighbour under github.io, got nothing
    assert sites.cookies("alice.github.io", "/again") == ["own=alice-own"]  # alice's own cookie still works
    assert len(items) == 3 and stats.requests_failed == 0
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert refused == ["cookie sid from alice.github.io refused: Domain=github.io is a public suffix"]
    assert "alice-secret" not in caplog.text  # the cookie is named, its value never logged
    assert_accounted(stats)


async def test_cookies_for_co_uk_and_herokuapp_com_are_refused_and_a_real_domain_is_kept() -> None:
    async with virtual_hosts() as sites:
        shop = page("http://www.shop.co.uk/", cookies=["shop=3; Domain=shop.co.uk"], links=["http://img.shop.co.uk/"])
        heroku = page(
            "http://alice.herokuapp.com/",
            cookies=["heroku=2; Domain=.herokuapp.com"],
            links=["http://bob.herokuapp.com/", "http://bob.co.uk/", shop],
        )
        start = page("http://alice.co.uk/", cookies=["uk=1; Domain=co.uk"], links=[heroku])
        items, _ = await collect(Walker, settings=proxied(sites.proxy), start_urls=[start])
    assert len(items) == 6
    assert sites.cookies("bob.co.uk") == [None] and sites.cookies("bob.herokuapp.com") == [None]
    assert sites.cookies("img.shop.co.uk") == ["shop=3"]  # suffixes are refused, not real domains


async def test_host_only_cookies_stay_on_their_host_also_after_a_restore() -> None:
    """A cookie without ``Domain`` goes to its host alone; so does one whose ``Domain`` is the host's
    own name when that name is a public suffix (RFC 6265 5.3 step 5); a saved jar keeps that."""
    async with virtual_hosts() as sites:
        jars = CookieJars()
        await fetch_all(
            jars,
            sites.proxy,
            page("http://alice.github.io/", cookies=["own=1"]),
            page("http://github.io/", cookies=["root=2; Domain=github.io"]),
            "http://sub.alice.github.io/",
            "http://alice.github.io/again",
            "http://carol.github.io/",
            "http://github.io/again",
        )
        restored = CookieJars()
        restored.restore(json.loads(json.dumps(jars.checkpoint())))  # as --state saves and reads it
        await fetch_all(restored, sites.proxy, "http://sub.alice.github.io/2", "http://alice.github.io/2")
        await fetch_all(restored, sites.proxy, "http://carol.github.io/2", "http://github.io/2")
    assert sites.cookies("sub.alice.github.io") == [None, None]
    assert sites.cookies("carol.github.io") == [None, None]
    assert sites.cookies("alice.github.io", "/again") == ["own=1"]
    assert sites.cookies("alice.github.io", "/2") == ["own=1"]
    assert sites.cookies("github.io", "/again") == ["root=2"] and sites.cookies("github.io", "/2") == ["root=2"]


async def fetch_all(jars: CookieJars, proxy: str, *urls: str) -> None:
    """Fetch ``urls`` in turn with the plain fetcher keeping cookies in ``jars``, through ``proxy``."""
    fetcher = PlainFetcher()
    fetcher.use_cookies(jars)
    await fetcher.open(Walker(), QUIET)
    try:
        for url in urls:
            await fetcher.fetch(Request(url, meta={"proxy": proxy}))
    finally:
        await fetcher.close()


# -- Secure, and the __Secure- and __Host- prefixes ---------------------------------------


async def test_a_secure_cookie_from_the_server_never_goes_over_http_nor_is_set_or_replaced_from_it(
    tmp_path: Path,
) -> None:
    async with tls_and_plain(tmp_path) as (https, http, sites):
        start = page(
            https + "/login",
            cookies=["sid=s3cret; Secure; Path=/", "theme=dark; Path=/"],
            links=[
                page(http + "/plain", cookies=["sid=forged; Path=/", "planted=1; Secure; Path=/"]),
                https + "/after",
            ],
        )
        items, stats = await collect(Walker, settings=TLS, start_urls=[start])
    assert sites.cookies("127.0.0.1", "/plain") == ["theme=dark"]  # never sid over http
    # http could neither replace the Secure sid (a network attacker's fixation) nor plant a Secure cookie
    assert sites.cookies("127.0.0.1", "/after") == ["sid=s3cret; theme=dark"]
    assert stats.requests_failed == 0 and len(items) == 3


@pytest.mark.parametrize("cookies", [True, False], ids=["jar", "cookies-off"])
async def test_a_secure_request_cookie_never_goes_over_http_and_its_path_and_domain_hold(
    tmp_path: Path, cookies: bool
) -> None:
    class Given(Spider):
        name = "given"
        https = ""

        async def start_requests(self) -> AsyncIterator[Request]:
            given = [
                {"name": "token", "value": "t0k3n", "secure": True},
                {"name": "lang", "value": "fr"},
                {"name": "deep", "value": "1", "path": "/account"},
                {"name": "elsewhere", "value": "1", "domain": "other.test"},
            ]
            for path in ("/plain", "/account/orders"):
                yield Request(self.start_urls[0] + path, meta={"cookies": given}, dont_filter=True)
            yield Request(self.https + "/safe", meta={"cookies": given})

        def parse(self, response: Response) -> Any:
            return []

    async with tls_and_plain(tmp_path) as (https, http, sites):
        settings = Settings(store="", retries=0, concurrency=1, verify_tls=False, cookies=cookies)
        await collect(Given, settings=settings, start_urls=[http], https=https)
    assert sites.cookies("127.0.0.1", "/plain") == ["lang=fr"]
    assert sites.cookies("127.0.0.1", "/account") == ["deep=1; lang=fr"]
    [safe] = sites.cookies("127.0.0.1", "/safe")
    assert sorted((safe or "").split("; ")) == ["lang=fr", "token=t0k3n"]  # over https: the Secure one too


async def test_prefixed_cookies_keep_their_rules(tmp_path: Path) -> None:
    async with tls_and_plain(tmp_path) as (https, http, sites):
        start = page(
            https + "/x/set",
            cookies=[
                "__Host-ok=1; Secure; Path=/",
                "__Host-path=2; Secure; Path=/x",  # not Path=/
                "__Host-insecure=3; Path=/",  # not Secure
                "__Host-dom=4; Secure; Path=/; Domain=127.0.0.1",  # a Domain
                "__Secure-ok=5; Secure; Path=/",
                "__secure-lower=6; Path=/",  # the prefix whatever its case: not Secure
            ],
            links=[
                page(http + "/x/plain", cookies=["__Host-http=7; Path=/", "__Secure-http=8; Path=/"]),
                https + "/x/2",
            ],
        )
        await collect(
            Walker, settings=Settings(store="", retries=0, concurrency=1, verify_tls=False), start_urls=[start]
        )
    assert sites.cookies("127.0.0.1", "/x/plain") == [None]
    assert sites.cookies("127.0.0.1", "/x/2") == ["__Host-ok=1; __Secure-ok=5"]


# -- SameSite -------------------------------------------------------------------------------


async def test_samesite_cookies_stay_off_requests_from_another_site() -> None:
    """A request found on another site's page is cross-site: it gets no ``Strict`` cookie, and a
    ``Lax`` one only when it is a GET (a browser's top-level navigation); a start URL is same-site."""
    async with virtual_hosts() as sites:
        blog = page(
            "http://blog.example.net/",
            links=["http://www.shop.com/from-blog"],
            post="http://www.shop.com/post-from-blog",
        )
        start = page(
            "http://www.shop.com/",
            cookies=["strict=1; SameSite=Strict", "lax=2; SameSite=lax", "plain=3"],
            links=["http://www.shop.com/same", blog],
        )
        await collect(Walker, settings=proxied(sites.proxy), start_urls=[start])
    assert sites.cookies("www.shop.com", "/same") == ["strict=1; lax=2; plain=3"]
    assert sites.cookies("www.shop.com", "/from-blog") == ["lax=2; plain=3"]
    assert sites.cookies("www.shop.com", "/post-from-blog") == ["plain=3"]


# -- sessions and the HTTP cache ----------------------------------------------------------


def visitors() -> tuple[web.Application, dict[str, int]]:
    """Pages that know visitors by a cookie; each new visitor gets the next number. A page shows the
    visitor it was asked by, and links to the next pages (and to ``?next=PATH``)."""
    count = {"visitors": 0}

    async def shelf(request: web.Request) -> web.Response:
        visitor = request.cookies.get("visitor")
        n = int(request.match_info["n"])
        paths = [f"/shelf/{m}" for m in (2 * n + 1, 2 * n + 2) if m < 12] + request.query.getall("next", [])
        links = "".join(f'<a href="{path}">{path}</a>' for path in paths)
        answer = web.Response(text=f'<p id="cookie">{visitor or ""}</p>{links}', content_type="text/html")
        if visitor is None:
            count["visitors"] += 1
            answer.set_cookie("visitor", str(count["visitors"]))
        return answer

    app = web.Application()
    app.router.add_get("/shelf/{n}", shelf)
    return app, count


class Sessioned(Spider):
    name = "sessioned"

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"session": response.meta["session"], "visitor": response.css("#cookie::text").get() or ""}
        yield from response.follow_all(css="a")


async def test_one_sessions_cookies_never_reach_another_sessions_request() -> None:
    app, count = visitors()
    async with serve(app) as base:
        settings = Settings(store="", retries=0, concurrency=2, sessions=2)
        items, stats = await collect(Sessioned, settings=settings, start_urls=[base + "/shelf/0"])
    assert len(items) == 12 and stats.requests_failed == 0
    seen: dict[str, set[str]] = {}
    for item in items:
        if item["visitor"]:
            seen.setdefault(item["session"], set()).add(item["visitor"])
    assert len(seen) == 2 and all(len(visitor) == 1 for visitor in seen.values())  # one visitor per session
    assert not seen["session-1"] & seen["session-2"] and count["visitors"] >= 2


async def test_the_cache_never_serves_one_sessions_page_to_another(tmp_path: Path) -> None:
    app, _ = visitors()
    cache = str(tmp_path / "cache")
    async with serve(app) as base:
        settings = Settings(store="", retries=0, concurrency=1, sessions=2, http_cache=cache)
        first, _ = await collect(Sessioned, settings=settings, start_urls=[base + "/shelf/20"])
        # the same page again, now second in line (linked from the first): asked for by the other session
        second, stats = await collect(Sessioned, settings=settings, start_urls=[base + "/shelf/21?next=/shelf/20"])
    assert [item["session"] for item in first] == ["session-1"]
    assert [item["session"] for item in second] == ["session-1", "session-2"]
    assert stats.counters["cache hit"] == 0  # session-2 never got session-1's /shelf/20


@pytest.mark.parametrize("incremental", [False, True], ids=["http_cache", "incremental"])
@pytest.mark.parametrize("credential", ["http_auth", "header", "cookie"])
async def test_the_cache_never_serves_one_credentials_page_to_another(
    tmp_path: Path, credential: str, incremental: bool
) -> None:
    """A page asked for with one user's credentials, then with another's: the second never gets the
    first's copy, neither from the cache nor by revalidating it (the server's ``ETag`` is the same)."""

    async def account(request: web.Request) -> web.Response:
        if request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304)  # a sloppy server: one ETag for every user's page
        who = request.headers.get("X-Api-Key") or request.cookies.get("sid") or request.headers.get("Authorization")
        return web.Response(text=f'<p id="cookie">{who}</p>', content_type="text/html", headers={"ETag": '"v1"'})

    app = web.Application()
    app.router.add_get("/account", account)
    cache = str(tmp_path / "cache")

    class Account(Spider):
        name = "account"
        user = ""

        async def start_requests(self) -> AsyncIterator[Request]:
            url = self.start_urls[0]
            if credential == "header":
                yield Request(url, headers={"X-Api-Key": f"key-of-{self.user}"})
            elif credential == "cookie":
                yield Request(url, cookies={"sid": f"sid-of-{self.user}"})
            else:
                yield Request(url)

        def parse(self, response: Response) -> Iterator[Any]:
            yield {"who": response.css("#cookie::text").get()}

    async with serve(app) as base:
        seen = []
        for user in ("alice", "bob"):
            more: dict[str, Any] = {"http_auth": f"{user}:pw-{user}@127.0.0.1"} if credential == "http_auth" else {}
            settings = Settings(store="", retries=0, http_cache=cache, incremental=incremental, **more)
            items, stats = await collect(Account, settings=settings, start_urls=[base + "/account"], user=user)
            seen.append(items[0]["who"])
            assert stats.counters["cache hit"] == stats.counters["cache revalidated"] == 0
    assert "alice" in seen[0] or "YWxpY2U6" in seen[0]  # alice's credential (basic auth: base64 "alice:")
    assert "bob" in seen[1] or "Ym9iOnB3" in seen[1]


# -- malformed cookies of a request (Scrapy's facts) -----------------------------------------


@pytest.mark.parametrize("cookies", [True, False], ids=["jar", "cookies-off"])
async def test_a_malformed_request_cookie_is_skipped_with_a_warning_and_the_rest_are_sent(
    cookies: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """As Scrapy's ``test_invalid_cookies``: a cookie with no name, no value or a value ``None`` is
    skipped with a WARNING (naming it, never its value) and the others are sent; an empty value is
    sent as ``name=``; a number is written as text (``test_primitive_type_cookies``)."""
    caplog.set_level(logging.WARNING, logger="eclaw")
    given: list[Any] = [
        {"value": "orphan-value"},
        {"name": "key", "value": "value1"},
        {"name": "foo"},
        {"name": "nothing", "value": None},
        {"name": ["a", "list"], "value": "listed-value"},
        {"name": "empty", "value": ""},
        {"name": "number", "value": 7},
        {"name": "inject", "value": "x; Domain=evil.test"},
        "not-a-dict",
    ]

    class Given(Spider):
        name = "given"

        async def start_requests(self) -> AsyncIterator[Request]:
            yield Request(self.start_urls[0] + "/list", meta={"cookies": given})
            yield Request(self.start_urls[0] + "/mapping", meta={"cookies": {"a": "1", "none": None}, "cookiejar": 2})

        def parse(self, response: Response) -> Iterator[Any]:
            yield {"url": response.url}

    heard: list[Heard] = []
    async with serve(site(heard)) as base:
        settings = Settings(store="", retries=0, concurrency=1, cookies=cookies)
        items, stats = await collect(Given, settings=settings, start_urls=[base])
    assert len(items) == 2 and stats.requests_failed == 0  # neither request failed for a bad cookie
    sent = {h.path: h.cookie for h in heard}
    assert sent == {"/list": "key=value1; empty=; number=7", "/mapping": "a=1"}
    skipped = sorted(r.getMessage().partition(" for ")[0] for r in caplog.records if "skipped" in r.getMessage())
    assert skipped == ["cookie #1", "cookie #5", "cookie #9", "cookie 'foo'", "cookie 'inject'", "cookie 'none'",
                       "cookie 'nothing'"]  # fmt: skip
    assert not any(value in caplog.text for value in ("orphan-value", "listed-value", "evil.test"))
