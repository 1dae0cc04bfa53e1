"""Credentials stay with their origin on every hop (issue 36, item 1): a request's ``Authorization``,
``Cookie`` and every sensitive header go to its own scheme, host and port only, and never over http
once its hops were https; ``http_auth`` is bound the same way. Real servers: one port speaking TLS
and plain HTTP (tests/security/origins.py), so a downgrade on the same host and port is real."""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.middlewares import Retry
from eclaw.testing import collect
from tests.conftest import assert_accounted
from tests.security.origins import Origin, dual_origin

SECRET = "Bearer t0ken-s3cret"
KEYS = {"Authorization": SECRET, "X-Api-Key": "k3y", "X-Auth-Token": "t0k", "Api-Key": "a9i", "X-Tenant-Secret": "ts"}
QUIET = Settings(store="", verify_tls=False, sensitive_headers="X-Tenant-Secret")


@pytest.fixture
async def other(tls: ssl.SSLContext) -> AsyncIterator[Origin]:
    """A second origin on another port of the same host."""
    async with dual_origin(tls) as running:
        yield running


class Hops(Spider):
    """Fetches ``start`` with ``headers`` (and ``meta``); an item per page reached."""

    name = "hops"
    start: str = ""
    headers: dict[str, str] = {}
    meta: dict[str, Any] = {}

    async def start_requests(self) -> AsyncIterator[Request]:
        yield Request(self.start, headers=dict(self.headers), meta=dict(self.meta))

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url, "title": response.css("title::text").get()}


async def crawl(start: str, settings: Settings = QUIET, engine: Engine | None = None, **args: Any) -> list[Any]:
    items, stats = await collect(Hops, settings=None if engine else settings, engine=engine, start=start, **args)
    assert_accounted(stats)
    assert stats.requests_failed == 0, stats.failed_by_reason
    return items


def to(origin: Origin, scheme: str, target: str, kind: str = "to") -> str:
    """A URL of ``origin`` that redirects (or, ``kind="refresh"``, refreshes) to ``target``."""
    return origin.url(scheme, f"/{kind}?url={quote(target, safe='')}")


async def test_an_authorization_header_is_not_sent_again_over_http_after_https(
    origin: Origin, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="eclaw")
    start = to(origin, "https", origin.url("http", "/plain"))  # the same host and port, downgraded
    items = await crawl(start, headers={"Authorization": SECRET})
    assert [item["title"] for item in items] == ["http /plain"]
    assert origin.with_header("Authorization") == [("https", "/to")]  # the https hop only
    assert "Authorization" in caplog.text and "https to http" in caplog.text and "t0ken" not in caplog.text


async def test_http_auth_is_not_sent_on_the_downgrade(origin: Origin) -> None:
    host = f"127.0.0.1:{origin.port}"
    start = to(origin, "https", origin.url("http", "/plain"))
    for entry in (f"alice:pw@{host}", f"https://alice:pw@{host}"):  # bound to the host and port, or to https too
        origin.heard.clear()
        await crawl(start, settings=QUIET.replace(http_auth=entry))
        assert origin.with_header("Authorization") == [("https", "/to")], entry
    origin.heard.clear()
    await crawl(origin.url("http", "/plain"), settings=QUIET.replace(http_auth=f"https://alice:pw@{host}"))
    assert origin.with_header("Authorization") == []  # an https credential never goes over http


@pytest.mark.parametrize("where", ["another host", "another port"])
async def test_credential_headers_are_dropped_on_a_cross_origin_redirect(
    origin: Origin, other: Origin, where: str
) -> None:
    target = origin.url("http", "/there", host="127.0.0.2") if where == "another host" else other.url("http", "/there")
    start = to(origin, "http", target)
    items = await crawl(start, headers=KEYS)
    assert [item["title"] for item in items] == ["http /there"]
    reached = (origin if where == "another host" else other).heard[-1]
    assert reached.path == "/there" and [name for name in KEYS if name in reached.headers] == []
    assert [name for name in KEYS if name in origin.heard[0].headers] == list(KEYS)  # the first hop had them all


async def test_credential_headers_are_kept_on_a_same_origin_redirect(origin: Origin) -> None:
    start = to(origin, "https", origin.url("https", "/here"))
    await crawl(start, headers=KEYS)
    assert origin.with_header("X-Tenant-Secret") == [("https", "/to"), ("https", "/here")]
    assert [name for name in KEYS if name in origin.heard[1].headers] == list(KEYS)


@pytest.mark.parametrize("where", ["https to http", "another host"])
async def test_a_meta_refresh_hop_is_scoped_like_a_redirect(origin: Origin, where: str) -> None:
    target = origin.url("http", "/next") if where == "https to http" else origin.url("https", "/next", host="127.0.0.2")
    start = to(origin, "https", target, kind="refresh")
    items = await crawl(start, headers=KEYS)
    assert [item["url"] for item in items] == [target]
    assert [seen.path.partition("?")[0] for seen in origin.heard] == ["/refresh", "/next"]
    assert [name for name in KEYS if name in origin.heard[1].headers] == []


async def test_a_hand_set_cookie_header_is_scoped_like_authorization(origin: Origin) -> None:
    start = to(origin, "https", to(origin, "https", origin.url("http", "/plain")))  # same origin, then downgraded
    await crawl(start, headers={"Cookie": "sid=s3cret"})
    cookies = [(seen.scheme, seen.headers.get("Cookie")) for seen in origin.heard]
    assert cookies == [("https", "sid=s3cret"), ("https", "sid=s3cret"), ("http", None)]


async def test_http_to_https_to_http_drops_them_on_the_way_back(origin: Origin) -> None:
    back = origin.url("http", "/back")
    start = to(origin, "http", to(origin, "https", back))  # the same host and port all along
    await crawl(start, headers=KEYS)
    assert [seen.scheme for seen in origin.heard] == ["http", "https", "http"]
    assert [name for name in KEYS if name in origin.heard[2].headers] == []


async def test_a_retried_request_sends_its_credentials_to_its_own_origin_only(origin: Origin) -> None:
    start = to(origin, "https", origin.url("http", "/busy"))  # the downgraded hop answers 503 once
    engine = Engine(QUIET, middlewares=[Retry(2, base=0.01)])
    await crawl(start, engine=engine, headers={"Authorization": SECRET})
    assert [(seen.scheme, seen.path.partition("?")[0]) for seen in origin.heard] == [
        ("https", "/to"),
        ("http", "/busy"),
        ("https", "/to"),
        ("http", "/busy"),
    ]
    assert [seen.headers.get("Authorization") for seen in origin.heard] == [SECRET, None, SECRET, None]


class Impersonated(Hops):
    name = "impersonated"
    fetcher = "impersonate"


async def test_the_impersonate_fetcher_drops_them_on_a_cross_origin_redirect(origin: Origin) -> None:
    start = to(origin, "http", origin.url("http", "/there", host="127.0.0.2"))
    items, stats = await collect(Impersonated, settings=QUIET, start=start, headers=KEYS)
    assert [item["title"] for item in items] == ["http /there"] and stats.requests_failed == 0
    assert [name for name in KEYS if name in origin.heard[0].headers] == list(KEYS)
    assert [name for name in KEYS if name in origin.heard[1].headers] == []


class Rendered(Hops):
    name = "rendered"
    fetcher = "browser"


async def test_the_browser_fetcher_drops_them_on_a_cross_origin_redirect(origin: Origin, tmp_path: Path) -> None:
    start = to(origin, "http", origin.url("http", "/there", host="127.0.0.2"))
    items, stats = await collect(Rendered, settings=QUIET, start=start, headers=KEYS)
    assert [item["title"] for item in items] == ["http /there"] and stats.requests_failed == 0
    assert [seen.path.partition("?")[0] for seen in origin.heard if seen.path != "/favicon.ico"] == ["/to", "/there"]
    assert [name for name in KEYS if name in origin.heard[0].headers] == list(KEYS)
    assert [name for name in KEYS if name in origin.heard[1].headers] == []
