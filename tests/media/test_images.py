"""The images pipeline: EXIF orientation applied, thumbnails, the minimum size filter (Pillow)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from eclaw import Settings, Spider
from eclaw.exceptions import ConfigError
from eclaw.media import ImagesPipeline
from eclaw.media.images import parse_thumbs
from eclaw.testing import collect, serve

Image = pytest.importorskip("PIL.Image")
pytestmark = pytest.mark.asyncio(loop_scope="module")


def _jpeg(width: int, height: int, orientation: int = 1) -> bytes:
    image = Image.new("RGB", (width, height), (200, 30, 30))
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    image.save(out, format="JPEG", exif=exif.tobytes())
    return out.getvalue()


IMAGES = {"/wide.jpg": _jpeg(400, 200), "/turned.jpg": _jpeg(400, 200, orientation=6), "/tiny.jpg": _jpeg(20, 20)}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def site():
    app = web.Application()

    async def image(request: web.Request) -> web.Response:
        return web.Response(body=IMAGES[request.path], content_type="image/jpeg")

    async def page(request: web.Request) -> web.Response:
        return web.Response(body=b"not an image", content_type="image/png")

    for path in IMAGES:
        app.router.add_get(path, image)
    app.router.add_get("/broken.png", page)
    async with serve(app) as base:
        yield base


class Gallery(Spider):
    name = "gallery"
    allowed_domains = ["127.0.0.1"]
    pipelines = [ImagesPipeline]

    def __init__(self, base: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base, self.start_urls = base, [f"{base}/wide.jpg"]

    def parse(self, response: Any) -> Any:
        yield {"image_urls": [self.base + p for p in ("/wide.jpg", "/turned.jpg", "/tiny.jpg", "/broken.png")]}


async def test_orientation_thumbnails_and_min_size(site: str, tmp_path: Path) -> None:
    settings = Settings(files_store=str(tmp_path), store="", images_thumbs="small=50x50,big=270x270",
                        images_min_width=100, images_min_height=100)  # fmt: skip
    items, _ = await collect(Gallery, settings=settings, base=site)
    wide, turned, tiny, broken = items[0]["images"]
    assert (wide["status"], wide["width"], wide["height"]) == ("downloaded", 400, 200)
    assert (tmp_path / wide["path"]).read_bytes() == IMAGES["/wide.jpg"]  # upright already: kept as sent
    with Image.open(tmp_path / wide["thumbs"]["small"]) as small:
        assert small.size == (50, 25)
    with Image.open(tmp_path / wide["thumbs"]["big"]) as big:
        assert big.size == (270, 135)
    assert (turned["width"], turned["height"]) == (200, 400)  # orientation 6: turned a quarter
    with Image.open(tmp_path / turned["path"]) as stored:
        assert stored.size == (200, 400) and stored.getexif().get(0x0112, 1) == 1
    assert tiny["status"] == "failed" and broken["status"] == "failed"
    assert not list((tmp_path / "tmp").iterdir())


async def test_thumbs_setting_is_checked() -> None:
    assert parse_thumbs("small=50x50, big=270X270") == {"small": (50, 50), "big": (270, 270)}
    with pytest.raises(ConfigError, match="images_thumbs"):
        parse_thumbs("small=50")
