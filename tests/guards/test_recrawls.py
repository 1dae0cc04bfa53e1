"""Guards of docs/recrawls.md: with ``incremental`` a re-run sends ``If-None-Match`` for a page kept
with an ``ETag`` and ``If-Modified-Since`` for one kept with only a ``Last-Modified``; a 304 gives the
callback the kept page; a page that changed is kept again, with its new validators. And the development
cache under it: a kept response is served until it is ``expire`` seconds old, then fetched again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from eclaw import Engine, Response, Settings, Spider
from eclaw.middlewares import HttpCache
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted

WHEN = ["Mon, 01 Dec 2025 08:00:00 GMT", "Tue, 02 Dec 2025 08:00:00 GMT"]


class Almanac:
    """``/tagged`` has only an ETag, ``/dated`` only a Last-Modified; ``edition`` changes both pages.
    ``asked`` records, per run, each page's conditional headers and the status it was answered."""

    def __init__(self) -> None:
        self.edition = 0
        self.asked: list[tuple[str, str | None, str | None, int]] = []

    def app(self) -> web.Application:
        async def tagged(request: web.Request) -> web.Response:
            etag = f'"e{self.edition}"'
            status = 304 if request.headers.get("If-None-Match") == etag else 200
            return self._answer(request, status, {"ETag": etag})

        async def dated(request: web.Request) -> web.Response:
            modified = WHEN[self.edition]
            status = 304 if request.headers.get("If-Modified-Since") == modified else 200
            return self._answer(request, status, {"Last-Modified": modified})

        app = web.Application()
        app.router.add_get("/tagged", tagged)
        app.router.add_get("/dated", dated)
        return app

    def _answer(self, request: web.Request, status: int, headers: dict[str, str]) -> web.Response:
        self.asked.append(
            (request.path, request.headers.get("If-None-Match"), request.headers.get("If-Modified-Since"), status)
        )
        if status == 304:
            return web.Response(status=304, headers=headers)
        text = f"<h1>{request.path} edition {self.edition}</h1>"
        return web.Response(text=text, content_type="text/html", headers=headers)


class Reader(Spider):
    name = "almanac"

    def parse(self, response: Response) -> Any:
        yield {"title": response.css("h1::text").get(), "not_modified": bool(response.meta.get("not_modified"))}


async def run(base: str, cache: Path) -> tuple[list[Any], Any]:
    settings = Settings(incremental=True, store="", http_cache=str(cache))
    items, stats = await collect(Reader, engine=Engine(settings), start_urls=[base + "/tagged", base + "/dated"])
    assert_accounted(stats)
    assert stats.requests_failed == 0
    return sorted(items, key=lambda item: item["title"]), stats


async def test_etag_and_last_modified_are_both_revalidated_and_new_validators_kept(tmp_path: Path) -> None:
    site = Almanac()
    async with serve(site.app()) as base:
        await run(base, tmp_path)
        site.asked.clear()
        same, stats = await run(base, tmp_path)  # nothing moved: both answered 304
        assert sorted(site.asked) == [("/dated", None, WHEN[0], 304), ("/tagged", '"e0"', None, 304)]
        assert stats.counters["cache revalidated"] == 2
        assert same == [
            {"title": "/dated edition 0", "not_modified": True},
            {"title": "/tagged edition 0", "not_modified": True},
        ]
        site.edition = 1  # both pages change
        site.asked.clear()
        moved, _ = await run(base, tmp_path)
        assert sorted(site.asked) == [("/dated", None, WHEN[0], 200), ("/tagged", '"e0"', None, 200)]
        assert [item["title"] for item in moved] == ["/dated edition 1", "/tagged edition 1"]
        site.asked.clear()
        again, stats = await run(base, tmp_path)  # asked with the new validators: 304 again
    assert sorted(site.asked) == [("/dated", None, WHEN[1], 304), ("/tagged", '"e1"', None, 304)]
    assert [item["title"] for item in again] == ["/dated edition 1", "/tagged edition 1"]
    assert stats.counters["cache revalidated"] == 2


async def test_the_cache_serves_a_response_until_it_is_expire_seconds_old(tmp_path: Path) -> None:
    site = Almanac()
    async with serve(site.app()) as base:
        for expire in (3600.0, 3600.0, 0.001, 0.001):  # stored, served; then too old: fetched, and again
            engine = Engine(Settings(store=""), middlewares=[HttpCache(tmp_path, expire=expire)])
            items, stats = await collect(Reader, engine=engine, start_urls=[base + "/tagged"])
            assert len(items) == 1 and stats.requests_failed == 0
    assert len(site.asked) == 3  # the first run and the two after the response was older than 1 ms
