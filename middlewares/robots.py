"""Robots: fetch, cache and obey robots.txt (parsed with protego)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Literal

from protego import Protego

from eclaw.contracts import Fetch
from eclaw.discovery.robots_txt import parse_robots
from eclaw.exceptions import DownloadError, HttpError, IgnoreRequest
from eclaw.http import Request, Response
from eclaw.http.urls import redact_url, url_host

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext

__all__ = ["Robots"]

logger = logging.getLogger(__name__)

_ALLOW_ALL = Protego.parse("")
_DISALLOW_ALL = Protego.parse("User-agent: *\nDisallow: /")


class Robots:
    """Drop requests that a host's robots.txt disallows (``RequestDropped(reason="robots")``).

    robots.txt is fetched once per scheme://host:port, through the middlewares
    inside this one (so proxy and user-agent apply), even when many requests
    for a new host arrive at once. Rules are matched for ``user_agent``:
    given, else the spider's ``user_agent`` / the ``user_agent`` setting, else
    ``"eclaw"``. A ``Crawl-delay`` becomes the host's minimum delay.

    Unavailable robots.txt, following RFC 9309 (as Google does): a 4xx status
    (404, 403, ...) allows everything; a 5xx status, timeout or network error
    ("unreachable") disallows everything for the crawl, unless
    ``unreachable="allow"``.

    Only the first ``robots_max_bytes`` of a robots.txt are read (500 KiB, as RFC 9309
    allows; the default fetcher stops downloading there) and the rest is ignored. A request with
    ``meta["dont_obey_robotstxt"]`` set is not checked (as in Scrapy). Each hop of a redirect obeys
    the robots.txt of its own host too (:meth:`check_hop`), as a new request would.
    """

    def __init__(
        self, user_agent: str | None = None, *, unreachable: Literal["disallow", "allow"] = "disallow"
    ) -> None:
        if unreachable not in ("disallow", "allow"):
            raise ValueError(f"Robots: unreachable must be 'disallow' or 'allow', not {unreachable!r}")
        self.user_agent = user_agent
        self.unreachable = unreachable
        self._agent = user_agent or "eclaw"
        self._rules: dict[str, asyncio.Future[Protego]] = {}  # origin -> fetch task
        self._crawl: CrawlContext | None = None
        self._next_start: dict[str, float] = {}  # host -> earliest start allowed by its Crawl-delay
        self._next: Fetch | None = None  # the middlewares inside this one (robots.txt of a redirect hop)
        self._max_bytes = 500 * 1024

    def __repr__(self) -> str:
        return f"Robots(user_agent={self._agent!r})"

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        self._agent = self.user_agent or crawl.spider.user_agent or crawl.settings.user_agent or "eclaw"
        self._max_bytes = crawl.settings.robots_max_bytes
        self._rules.clear()
        self._next_start.clear()

    async def close(self) -> None:
        for task in self._rules.values():
            task.cancel()
        if self._rules:
            await asyncio.gather(*self._rules.values(), return_exceptions=True)

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        self._next = call_next  # the same for every request of the crawl: its redirect hops use it too
        await self._obey(request, request.url, call_next)
        return await call_next(request)

    async def check_hop(self, request: Request, url: str) -> None:
        """A redirect hop of ``request`` to ``url`` obeys the robots.txt of its host (fetched first if
        need be), as a new request would (:class:`~eclaw.contracts.ChecksHops`)."""
        if self._next is not None:
            await self._obey(request, url, self._next)

    async def _obey(self, request: Request, url: str, call_next: Fetch) -> None:
        meta = request._meta  # not request.meta: that would give every request a dict
        if url.startswith(("http://", "https://")) and not (
            meta and (meta.get("robots.txt") or meta.get("dont_obey_robotstxt"))
        ):
            rules = await self.rules_for(url, call_next)
            if not rules.can_fetch(url, self._agent):
                raise IgnoreRequest("robots")
            delay = rules.crawl_delay(self._agent)
            if delay:
                await self._space(url, float(delay))

    async def _space(self, url: str, delay: float) -> None:
        """Crawl-delay for the requests the frontier let through before the delay was known
        (the first burst to a new host); later ones arrive already spaced and pass at once."""
        host = url_host(url)
        now = asyncio.get_running_loop().time()
        start = max(now, self._next_start.get(host, now))
        self._next_start[host] = start + delay
        if start > now:
            await asyncio.sleep(start - now)

    async def rules_for(self, url: str, call_next: Fetch) -> Protego:
        """The parsed robots.txt for ``url``'s origin, fetched on first use."""
        scheme, _, rest = url.partition("://")
        origin = f"{scheme}://{rest.split('/', 1)[0].split('?', 1)[0].split('#', 1)[0]}"
        task = self._rules.get(origin)
        if task is None:  # one fetch per origin, in its own task: a cancelled request does not cancel it
            task = self._rules[origin] = asyncio.ensure_future(self._fetch(origin, call_next))
        return await asyncio.shield(task)

    async def _fetch(self, origin: str, call_next: Fetch) -> Protego:
        robots_url = f"{origin}/robots.txt"
        # one byte past the limit read tells a cut robots.txt (its partial last line dropped) from a whole one
        meta = {"robots.txt": True, "dont_retry": True, "max_body_bytes": self._max_bytes + 1}
        request = Request(robots_url, dont_filter=True, meta=meta)
        try:
            response = await call_next(request)
        except HttpError as exc:
            if exc.status < 500:
                logger.debug("%s: HTTP %d, everything allowed", redact_url(robots_url), exc.status)
                return _ALLOW_ALL
            return self._unreachable(robots_url, exc)
        except IgnoreRequest as exc:  # e.g. redirected off the allowed domains
            logger.debug("%s: %s, everything allowed", redact_url(robots_url), exc.reason)
            return _ALLOW_ALL
        except DownloadError as exc:
            return self._unreachable(robots_url, exc)
        rules = parse_robots(response.body, self._max_bytes, redact_url(robots_url))
        delay = rules.crawl_delay(self._agent)
        if delay and self._crawl is not None:
            self._crawl.set_delay(url_host(origin), float(delay), floor=True)
        return rules

    def _unreachable(self, url: str, error: DownloadError) -> Protego:
        verdict = _DISALLOW_ALL if self.unreachable == "disallow" else _ALLOW_ALL
        shown = redact_url(url)
        logger.warning("%s unreachable (%s): %s everything on this host", shown, error.reason, self.unreachable)
        return verdict
