"""UserAgent: a realistic browser User-Agent (optionally rotated) with matching headers."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eclaw.contracts import Fetch
from eclaw.http import Request, Response
from eclaw.http.urls import url_host

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext

__all__ = ["BROWSERS", "UserAgent"]

_HTML = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
_CHROME_HTML = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
    "application/signed-exchange;v=b3;q=0.7"
)
# (User-Agent, Accept, Accept-Language) as current desktop browsers send them; the first is the default.
BROWSERS: tuple[tuple[str, str, str], ...] = (
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/142.0.0.0 Safari/537.36",
        _CHROME_HTML,
        "en-US,en;q=0.9",
    ),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/142.0.0.0 Safari/537.36",
        _CHROME_HTML,
        "en-US,en;q=0.9",
    ),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/142.0.0.0 Safari/537.36 Edg/142.0.0.0",
        _CHROME_HTML,
        "en-US,en;q=0.9",
    ),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:145.0) Gecko/20100101 Firefox/145.0", _HTML, "en-US,en;q=0.5"),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:145.0) Gecko/20100101 Firefox/145.0", _HTML, "en-US,en;q=0.5"),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/26.1 Safari/605.1.15",
        "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        "en-US,en;q=0.9",
    ),
)


class UserAgent:
    """Give every request a browser ``User-Agent`` and the ``Accept`` headers that go with it.

    By default one realistic UA (the first of :data:`BROWSERS`) is used for the
    whole crawl. A UA set on the request, on the spider (``user_agent``
    attribute) or in the ``user_agent`` setting always wins.

    Args:
        agents: UA strings, or a path of a file with one per line; ``None``
            means the built-in browser list (with matching headers).
        rotate: pick a UA per request ("round-robin" or "random") instead of one per crawl.
        sticky: with ``rotate``, keep one UA per host.
    """

    def __init__(
        self,
        agents: Sequence[str] | str | Path | None = None,
        *,
        rotate: str | None = None,
        sticky: bool = False,
        rng: random.Random | None = None,
    ) -> None:
        if rotate not in (None, "round-robin", "random"):
            raise ValueError(f"UserAgent: rotate must be 'round-robin' or 'random', not {rotate!r}")
        if isinstance(agents, str | Path):
            lines = Path(agents).read_text(encoding="utf-8").splitlines()
            agents = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
        if agents is None:
            self.profiles = list(BROWSERS)
        else:
            self.profiles = [(ua, *_headers_for(ua)) for ua in agents]
        if not self.profiles:
            raise ValueError("UserAgent: the list of user agents is empty")
        self.rotate = rotate
        self.sticky = sticky
        self._rng = rng or random.Random()
        self._cycle = itertools.cycle(self.profiles)
        self._by_host: dict[str, tuple[str, str, str]] = {}
        self._fixed: tuple[str, str, str] | None = None

    def __repr__(self) -> str:
        return f"UserAgent({len(self.profiles)} agents, rotate={self.rotate!r})"

    async def open(self, crawl: CrawlContext) -> None:
        fixed = crawl.spider.user_agent or crawl.settings.user_agent
        self._fixed = (fixed, *_headers_for(fixed)) if fixed else None
        self._by_host.clear()

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        headers = request._headers
        if headers and any(name.lower() == "user-agent" for name in headers):
            return await call_next(request)
        ua, accept, language = self._fixed or self._pick(request)
        if not headers:  # the common case: all three
            return await call_next(
                request.replace(headers={"User-Agent": ua, "Accept": accept, "Accept-Language": language})
            )
        added = {"User-Agent": ua}
        present = {name.lower() for name in headers}
        if "accept" not in present:
            added["Accept"] = accept
        if "accept-language" not in present:
            added["Accept-Language"] = language
        return await call_next(request.replace(headers={**headers, **added}))

    def _pick(self, request: Request) -> tuple[str, str, str]:
        if self.rotate is None:
            return self.profiles[0]
        if self.sticky:
            host = url_host(request.url)
            profile = self._by_host.get(host)
            if profile is None:
                profile = self._by_host[host] = self._next()
            return profile
        return self._next()

    def _next(self) -> tuple[str, str, str]:
        return next(self._cycle) if self.rotate == "round-robin" else self._rng.choice(self.profiles)


def _headers_for(ua: str) -> tuple[str, str]:
    """Accept and Accept-Language that a browser with this UA sends."""
    for known, accept, language in BROWSERS:
        if ("Firefox/" in ua) == ("Firefox/" in known) and ("Chrome/" in ua) == ("Chrome/" in known):
            return accept, language
    return _HTML, "en-US,en;q=0.9"
