"""The HTTP fetcher against a local fault site."""

from __future__ import annotations

import pytest

from eclaw import IgnoreRequest, Request, Settings, Spider
from eclaw.exceptions import (
    ConnectError,
    ConnectionLost,
    DownloadTimeout,
    RedirectLoop,
    ResponseTooLarge,
    TooManyRedirects,
    TruncatedResponse,
    UnsupportedRedirect,
)
from eclaw.fetchers.plain import PlainFetcher
from eclaw.testing import serve
from tests.sites import fault_app


class Local(Spider):
    name = "local"
    allowed_domains = ["127.0.0.1"]


@pytest.fixture
async def fetch():
    async with serve(fault_app()) as base:
        fetcher = PlainFetcher()
        await fetcher.open(Local(), Settings(max_redirects=5, read_timeout=0.5, max_response_size=1024 * 1024))

        async def get(path: str, **kwargs):
            return await fetcher.fetch(Request(base + path, **kwargs))

        get.base = base  # type: ignore[attr-defined]
        yield get
        await fetcher.close()


async def test_redirect_chain_is_followed_and_recorded(fetch) -> None:
    response = await fetch("/chain/3")
    assert response.status == 200 and response.url.endswith("/chain/0")
    assert [u.rsplit("/", 1)[1] for u in response.meta["redirect_urls"]] == ["3", "2", "1"]


async def test_too_many_redirects(fetch) -> None:
    with pytest.raises(TooManyRedirects):
        await fetch("/chain/9")


async def test_redirect_loop_detected(fetch) -> None:
    with pytest.raises(RedirectLoop):
        await fetch("/loop/a")


async def test_offsite_redirect_is_ignored_not_fetched(fetch) -> None:
    with pytest.raises(IgnoreRequest, match="offsite redirect"):
        await fetch("/offsite")


async def test_redirect_to_other_scheme_fails(fetch) -> None:
    with pytest.raises(UnsupportedRedirect):
        await fetch("/mailto")


async def test_303_turns_post_into_get(fetch) -> None:
    response = await fetch("/see-other", method="POST", body=b"data")
    assert response.json()["method"] == "GET"


async def test_declared_size_over_limit_refused(fetch) -> None:
    with pytest.raises(ResponseTooLarge, match="Content-Length"):
        await fetch("/big-declared")


async def test_streamed_body_over_limit_refused(fetch) -> None:
    with pytest.raises(ResponseTooLarge):
        await fetch("/big")


async def test_gzip_bomb_refused_by_decompressed_size(fetch) -> None:
    with pytest.raises(ResponseTooLarge):
        await fetch("/gzip-bomb")


async def test_deflate_is_decoded(fetch) -> None:
    response = await fetch("/deflate")
    assert response.css("h1::text").get() == "zipped ünïcode"


async def test_read_timeout(fetch) -> None:
    with pytest.raises(DownloadTimeout):
        await fetch("/sleepy?s=3")


async def test_truncated_body(fetch) -> None:
    with pytest.raises((TruncatedResponse, ConnectionLost)):
        await fetch("/truncated")


async def test_cookies_kept_per_crawl_and_user_agent_sent(fetch) -> None:
    await fetch("/set-cookie")
    echoed = (await fetch("/echo")).json()
    assert echoed["cookies"] == {"session": "abc123"}
    assert echoed["headers"]["User-Agent"].startswith("eclaw/")


async def test_status_codes_are_returned(fetch) -> None:
    response = await fetch("/status/404")
    assert response.status == 404


async def test_connection_refused_is_connect_error() -> None:
    fetcher = PlainFetcher()
    await fetcher.open(Local(), Settings(connect_timeout=2))
    try:
        with pytest.raises(ConnectError, match="cannot connect"):
            await fetcher.fetch(Request("http://127.0.0.1:9/"))  # discard port: nothing listens
    finally:
        await fetcher.close()
