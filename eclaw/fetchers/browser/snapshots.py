"""Screenshots of pages that failed: what the browser showed when time ran out or a step failed."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from eclaw.http.urls import redact_url

if TYPE_CHECKING:
    from playwright.async_api import Page

__all__ = ["Screenshots"]

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
SCREENSHOT_TIMEOUT = 5.0  # a page stuck in a script may never paint: do not wait for it long


class Screenshots:
    """At most ``limit`` PNG screenshots per crawl, written to ``folder`` (``None``: none)."""

    def __init__(self, folder: Path | None, limit: int) -> None:
        self.folder = folder
        self.limit = limit
        self.taken = 0

    async def take(self, page: Page, url: str) -> Path | None:
        """A screenshot of ``page`` (fetched for ``url``), or ``None`` past the limit or if it fails."""
        if self.folder is None or self.taken >= self.limit:
            return None
        self.taken += 1
        slug = _UNSAFE.sub("-", redact_url(url).partition("://")[2]).strip("-")[:80]
        path = self.folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{self.taken:03d}-{slug}.png"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            async with asyncio.timeout(SCREENSHOT_TIMEOUT + 1):  # here too: a wedged driver never times out
                await page.screenshot(path=str(path), timeout=SCREENSHOT_TIMEOUT * 1000)
        except Exception as exc:  # a crashed page, a full disk: the failure is reported without it
            logger.warning("no screenshot of %s: %s", redact_url(url), str(exc).splitlines()[0] if str(exc) else exc)
            return None
        return path
