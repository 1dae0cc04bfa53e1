"""What the crawl needs from a downloader: fetch one request (after the middlewares)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from eclaw.http import Request, Response

if TYPE_CHECKING:
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["Downloader"]


class Downloader(Protocol):
    """Fetches one request, redirects included; raises :class:`eclaw.exceptions.DownloadError` subclasses
    (and ``IgnoreRequest`` for a redirect off the allowed domains)."""

    async def open(self, spider: Spider, settings: Settings) -> None: ...

    async def fetch(self, request: Request) -> Response: ...

    async def close(self) -> None: ...
