"""The files pipeline: files named by items, downloaded through the crawl into a content-addressed store."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from eclaw import Settings, Spider
from eclaw.media import FilesPipeline
from eclaw.testing import collect, serve

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _content(n: int) -> bytes:
    return f"file {n} ".encode() * (1000 + n)


def _app(hits: dict[str, int]) -> web.Application:
    app = web.Application()

    async def numbered(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        hits[name] = hits.get(name, 0) + 1
        return web.Response(body=_content(int(name.split(".")[0])), content_type="application/octet-stream")

    async def same(request: web.Request) -> web.Response:
        return web.Response(body=_content(1), content_type="application/octet-stream")

    async def flaky(request: web.Request) -> web.Response:
        hits["flaky"] = hits.get("flaky", 0) + 1
        if hits["flaky"] < 3:
            return web.Response(status=503, text="busy")
        return web.Response(body=b"at last", content_type="text/plain")

    gate = asyncio.Event()

    async def gated(request: web.Request) -> web.Response:
        hits["gated"] = hits.get("gated", 0) + 1
        if hits["gated"] >= 3:
            gate.set()
        try:
            await asyncio.wait_for(gate.wait(), 5)
        except TimeoutError:
            return web.Response(status=404)  # the files were not all in flight at once
        return web.Response(body=request.path.encode(), content_type="application/octet-stream")

    async def late(request: web.Request) -> web.Response:
        await asyncio.sleep(0.3)  # the crawl's checkpoints (every 10 ms) come while the item waits for it
        return web.Response(body=request.path.encode(), content_type="application/octet-stream")

    app.router.add_get("/late/{name}", late)
    app.router.add_get("/gated/{name}", gated)
    app.router.add_get("/f/{name}", numbered)
    app.router.add_get("/same-as-1", same)
    app.router.add_get("/flaky.txt", flaky)
    return app


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def site():
    hits: dict[str, int] = {}
    async with serve(_app(hits)) as base:
        yield base, hits


class Items(Spider):
    name = "items"
    allowed_domains = ["127.0.0.1"]
    pipelines = [FilesPipeline]

    def __init__(self, base: str, items: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base, self.items = base, items
        self.start_urls = [f"{base}/f/0.bin"]

    def parse(self, response: Any) -> Any:
        for item in self.items:
            yield {**item, "file_urls": [self.base + path for path in item["file_urls"]]}


def _settings(store: Path, **more: Any) -> Settings:
    return Settings(files_store=str(store), store="", **more)  # type: ignore[arg-type]


async def test_files_are_stored_by_content_and_listed_on_the_item(site: Any, tmp_path: Path) -> None:
    base, hits = site
    items = [{"n": 1, "file_urls": ["/f/1.bin", "/f/2.bin"]}, {"n": 2, "file_urls": ["/f/2.bin", "/same-as-1"]}]
    stored, _ = await collect(Items, settings=_settings(tmp_path), base=base, items=items)
    by_n = {item["n"]: item["files"] for item in stored}
    one, two = by_n[1]
    assert one["status"] == "downloaded" and one["size"] == len(_content(1))
    assert one["checksum"] == hashlib.sha256(_content(1)).hexdigest()
    assert (tmp_path / one["path"]).read_bytes() == _content(1)
    assert one["path"].endswith(".bin") and one["media_type"] == "application/octet-stream"
    assert by_n[2][0]["checksum"] == two["checksum"] and by_n[2][1]["checksum"] == one["checksum"]
    stored_files = list((tmp_path / "full").rglob("*.*"))
    assert len(stored_files) == 2  # /same-as-1 is 1.bin's content (and its type's extension .bin): kept once
    assert hits["2.bin"] == 1  # the same URL in two items: fetched once
    assert not list((tmp_path / "tmp").iterdir())


async def test_stored_files_are_not_fetched_again_until_they_expire(site: Any, tmp_path: Path) -> None:
    base, hits = site
    items = [{"n": 1, "file_urls": ["/f/3.bin"]}]
    await collect(Items, settings=_settings(tmp_path), base=base, items=items)
    again, _ = await collect(Items, settings=_settings(tmp_path), base=base, items=items)
    assert again[0]["files"][0]["status"] == "uptodate" and hits["3.bin"] == 1
    expired, _ = await collect(Items, settings=_settings(tmp_path, files_expires=0.0), base=base, items=items)
    assert expired[0]["files"][0]["status"] == "downloaded" and hits["3.bin"] == 2


async def test_503_is_retried_and_a_failed_file_keeps_its_item(site: Any, tmp_path: Path) -> None:
    base, _ = site
    items = [{"n": 1, "file_urls": ["/flaky.txt", "/nowhere.bin"]}]
    stored, _ = await collect(Items, settings=_settings(tmp_path), base=base, items=items)
    flaky, missing = stored[0]["files"]
    assert flaky["status"] == "downloaded" and (tmp_path / flaky["path"]).read_bytes() == b"at last"
    assert missing == {"url": f"{base}/nowhere.bin", "path": "", "checksum": "", "size": 0, "media_type": "",
                       "status": "failed", "reason": f"HTTP 404 for {base}/nowhere.bin"}  # fmt: skip
    dropped, _ = await collect(Items, settings=_settings(tmp_path, files_drop_failed=True), base=base, items=items)
    assert dropped == []


async def test_a_file_over_files_max_size_fails(site: Any, tmp_path: Path) -> None:
    base, _ = site
    items = [{"n": 1, "file_urls": ["/f/4.bin"]}]
    stored, _ = await collect(Items, settings=_settings(tmp_path, files_max_size=100), base=base, items=items)
    assert stored[0]["files"][0]["status"] == "failed"


async def test_the_files_of_several_items_are_in_flight_at_once(site: Any, tmp_path: Path) -> None:
    base, _ = site
    items = [{"n": n, "file_urls": [f"/gated/{n}.bin"]} for n in range(3)]
    stored, _ = await collect(Items, settings=_settings(tmp_path, retries=0), base=base, items=items)
    assert [item["files"][0]["status"] for item in sorted(stored, key=lambda i: i["n"])] == ["downloaded"] * 3


async def test_checkpoints_while_an_item_waits_for_its_files(site: Any, tmp_path: Path) -> None:
    """With --state, a checkpoint waits for the items in the pipelines; the callbacks of their files
    must not be held at the checkpoint's gate (it would wait for itself)."""
    base, _ = site
    items = [{"n": n, "file_urls": [f"/late/{n}.bin"]} for n in range(3)]
    settings = _settings(tmp_path / "files", state_dir=str(tmp_path / "state"), checkpoint_interval=0.01)
    stored, stats = await asyncio.wait_for(collect(Items, settings=settings, base=base, items=items), 60)
    assert [item["files"][0]["status"] for item in sorted(stored, key=lambda i: i["n"])] == ["downloaded"] * 3
    assert stats.finish_reason == "finished"
