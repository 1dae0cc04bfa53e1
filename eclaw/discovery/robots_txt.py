"""Reading a robots.txt body: bounded, and decoded the way Scrapy and Protego do.

RFC 9309 lets a crawler stop reading a robots.txt at 500 KiB: only the first
``robots_max_bytes`` bytes are read (a partial last line is dropped), the rest is
ignored. The text is UTF-8 (RFC 9309); bytes that are not are ignored, except on a
``Sitemap:`` line, which is dropped whole: a URL with bytes removed from it is
another URL.
"""

from __future__ import annotations

import logging
import re

from protego import Protego

__all__ = ["parse_robots", "robots_text"]

logger = logging.getLogger(__name__)

_SITEMAP_LINE = re.compile(rb"\s*(?:sitemaps?|site-map)\s*:", re.IGNORECASE)


def robots_text(body: bytes, limit: int, url: str = "") -> str:
    """The text of a robots.txt ``body``: its first ``limit`` bytes (whole lines), as UTF-8."""
    body = body.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark
    if len(body) > limit:
        cut = body.rfind(b"\n", 0, limit + 1)
        body = body[: cut + 1] if cut >= 0 else body[:limit]
        logger.info("%s: over %d bytes (robots_max_bytes): the rest is ignored", url or "robots.txt", limit)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    lines = []
    for line in body.splitlines(keepends=True):
        try:
            lines.append(line.decode("utf-8"))
        except UnicodeDecodeError:
            if _SITEMAP_LINE.match(line):
                logger.debug("%s: a Sitemap line that is not UTF-8 dropped", url or "robots.txt")
                continue
            lines.append(line.decode("utf-8", errors="ignore"))
    return "".join(lines)


def parse_robots(body: bytes, limit: int, url: str = "") -> Protego:
    """The rules of a robots.txt ``body`` (:func:`robots_text`)."""
    return Protego.parse(robots_text(body, limit, url))
