"""The images pipeline: the files pipeline for an item's ``image_urls``, with Pillow (``pip install 'eclaw[media]'``).

Each image is checked and measured once whole in its temporary file, in a worker thread: one
under ``images_min_width`` x ``images_min_height`` (after its EXIF orientation) is refused (listed as
``failed``); one whose EXIF orientation turns it is stored turned (re-saved in its own format, so
what a browser shows is what is stored; its ``checksum`` is of the stored bytes); ``images_thumbs``
(``"small=50x50,big=270x270"``) makes JPEG thumbnails that fit those boxes, kept as
``thumbs/<name>/<checksum>.jpg``. Besides the files pipeline's fields, each entry of ``images``
has ``width``, ``height`` and ``thumbs`` (name to path). Pillow's decompression-bomb limit
(``Image.MAX_IMAGE_PIXELS``) refuses an image of too many pixels.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from eclaw.exceptions import ConfigError
from eclaw.media.pipeline import FileRefused, FilesPipeline

if TYPE_CHECKING:
    from PIL import Image as PILImage

    from eclaw.contracts import CrawlContext
    from eclaw.media.store import Stored, TempFile

__all__ = ["ImagesPipeline", "parse_thumbs"]

_ORIENTATION = 0x0112  # the EXIF tag


def parse_thumbs(spec: str) -> dict[str, tuple[int, int]]:
    """``"small=50x50,big=270x270"`` as ``{"small": (50, 50), "big": (270, 270)}``.

    Raises:
        ConfigError: a part that is not ``name=WxH`` with positive sizes.
    """
    thumbs: dict[str, tuple[int, int]] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, size = part.partition("=")
        width, _, height = size.lower().partition("x")
        if not (name.strip().isidentifier() and width.isdigit() and height.isdigit() and int(width) and int(height)):
            raise ConfigError(f"setting 'images_thumbs': {part!r} is not name=WIDTHxHEIGHT")
        thumbs[name.strip()] = (int(width), int(height))
    return thumbs


class ImagesPipeline(FilesPipeline):
    """Downloads an item's images through the crawl (see the module's docstring)."""

    async def open(self, crawl: CrawlContext) -> None:
        try:
            import PIL  # noqa: F401
        except ImportError:
            raise ConfigError("ImagesPipeline needs Pillow: pip install 'eclaw[media]'") from None
        settings = crawl.settings
        self._thumbs = parse_thumbs(settings.images_thumbs)
        self._min = (settings.images_min_width, settings.images_min_height)
        await super().open(crawl)
        self._urls_field, self._result_field = settings.images_urls_field, settings.images_result_field

    async def store_body(self, url: str, body: TempFile, media_type: str) -> Stored:
        body.seal()
        store = self._opened()
        tmp = store.root / "tmp"
        turned, width, height, thumbs = await asyncio.to_thread(_prepare, body.path, tmp, self._min, self._thumbs)
        if turned is not None:
            body.adopt(turned)
        checksum = body.checksum()
        made = {name: await store.place(path, f"thumbs/{name}/{checksum}.jpg") for name, path in thumbs.items()}
        return await self._commit(url, body, media_type, {"width": width, "height": height, "thumbs": made})


def _prepare(
    path: Path, tmp: Path, least: tuple[int, int], thumbs: dict[str, tuple[int, int]]
) -> tuple[Path | None, int, int, dict[str, Path]]:
    """The image at ``path``, turned upright if its EXIF says so (a new file, else ``None``), its size
    upright, and its thumbnails (files under ``tmp``).

    Raises:
        FileRefused: not an image Pillow reads, too many pixels, or smaller than ``least``.
    """
    from PIL import Image, ImageOps, UnidentifiedImageError

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(path) as image:
                image.load()
                kind = image.format or "PNG"
                upright = ImageOps.exif_transpose(image) if image.getexif().get(_ORIENTATION, 1) != 1 else None
                shown = upright if upright is not None else image
                width, height = shown.size
                if width < least[0] or height < least[1]:
                    raise FileRefused(f"image too small: {width}x{height} < {least[0]}x{least[1]}")
                turned = _save(shown, tmp, kind) if upright is not None else None
                made = {name: _thumbnail(shown, box, tmp) for name, box in thumbs.items()}
        except (UnidentifiedImageError, Image.DecompressionBombError, Image.DecompressionBombWarning, OSError) as exc:
            raise FileRefused(f"not a readable image: {exc}") from exc
    return turned, width, height, made


def _thumbnail(image: PILImage.Image, box: tuple[int, int], tmp: Path) -> Path:
    small = image.convert("RGB")
    small.thumbnail(box)
    return _save(small, tmp, "JPEG")


def _save(image: PILImage.Image, tmp: Path, kind: str) -> Path:
    """``image`` in a durable new file under ``tmp``."""
    fd, name = tempfile.mkstemp(dir=tmp, suffix=".part")
    with os.fdopen(fd, "wb") as file:
        if kind == "JPEG" and image.mode not in ("RGB", "L", "CMYK"):
            image = image.convert("RGB")
        image.save(file, format=kind)
        file.flush()
        os.fsync(file.fileno())
    return Path(name)
