"""A spider's sitemaps: from ``sitemap_urls`` (sitemaps, indexes, robots.txt) to its pages.

Each URL of ``sitemap_urls`` is fetched with the spider's ``_parse_sitemap`` callback: a
robots.txt gives its ``Sitemap:`` lines, an index its child sitemaps (those
``sitemap_follow`` matches), a urlset its pages, each sent to the callback of the first
``sitemap_rules`` pattern it matches (no match: not fetched). ``sitemap_since`` skips
entries whose ``<lastmod>`` is older, in indexes too: a sitemap not changed since then
lists no page that changed. Entries without a ``<lastmod>`` are kept. Documents are read
off the event loop (:mod:`eclaw.discovery.sitemap_xml`).

Bounded: indexes are followed ``sitemap_max_depth`` deep (a sitemap ``sitemap_urls`` or a
robots.txt names is depth 0; one an index at depth 10 names is dropped, ``sitemap too
deep``), at most ``sitemap_max_urls`` entries are taken from one document (the rest
counted, the first listed as dropped: ``sitemap too many URLs``), and a robots.txt is read
``robots_max_bytes`` far.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Protocol

from eclaw.discovery.links import resolve
from eclaw.discovery.patterns import Glob, UrlPattern, compile_patterns, patterns
from eclaw.discovery.robots_txt import parse_robots
from eclaw.discovery.sitemap_xml import Entry, Sitemap, parse_date, read_sitemap
from eclaw.exceptions import ConfigError, InvalidURL
from eclaw.http.request import Request

if TYPE_CHECKING:
    from eclaw.http.response import Response
    from eclaw.settings import Settings
    from eclaw.stats import Stats

__all__ = ["Refused", "Sitemaps", "SitemapsOwner"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Refused:
    """A sitemap entry not taken, and why (``sitemap too deep``, ``sitemap too many URLs``): the
    crawl lists it as a drop, as a ``RequestDropped`` a callback yields (this layer emits no events)."""

    request: Request
    reason: str


class SitemapsOwner(Protocol):
    """What sitemaps need of their spider (:class:`eclaw.spider.Spider`): its ``sitemap_*``
    attributes and its sitemap callback; a ``sitemap_rules`` callback given by name is looked up on it too."""

    @property
    def name(self) -> str: ...

    @property
    def sitemap_urls(self) -> Sequence[str]: ...

    @property
    def sitemap_rules(self) -> Sequence[tuple[UrlPattern, str | Callable[..., Any]]]: ...

    @property
    def sitemap_follow(self) -> Sequence[UrlPattern]: ...

    @property
    def sitemap_since(self) -> date | str | None: ...

    @property
    def sitemap_alternate_links(self) -> bool: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def stats(self) -> Stats: ...

    def _parse_sitemap(self, response: Response) -> AsyncIterator[Request]: ...


class Sitemaps:
    """A spider's ``sitemap_*`` attributes, checked and compiled."""

    def __init__(self, spider: SitemapsOwner) -> None:
        what = f"spider {spider.name!r}"
        urls = spider.sitemap_urls
        if isinstance(urls, str | bytes) or not isinstance(urls, Sequence):
            raise ConfigError(f"{what}: sitemap_urls must be a list of URLs, got {urls!r}")
        self.urls = [Request(url).url for url in urls]  # a malformed one: InvalidURL, naming it
        for url in self.urls:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"{what}: sitemap URL {url!r} is not an http(s) URL")
        self._rules = [
            self._rule(spider, index, rule) for index, rule in enumerate(_listed(spider.sitemap_rules, what))
        ]
        self._follow = compile_patterns(
            patterns(spider.sitemap_follow, f"{what} sitemap_follow"), f"{what} sitemap_follow"
        )
        self._since = _since(spider.sitemap_since, what)
        self._alternates = _flag(spider.sitemap_alternate_links, f"{what}: sitemap_alternate_links")
        self._read: Callable[..., Any] = spider._parse_sitemap
        self._owner = spider

    @staticmethod
    def _rule(spider: SitemapsOwner, index: int, rule: Any) -> tuple[re.Pattern[str] | None, Callable[..., Any]]:
        what = f"spider {spider.name!r} sitemap_rules[{index}]"
        if isinstance(rule, str | bytes) or not isinstance(rule, Sequence) or len(rule) != 2:
            raise ConfigError(f"{what} must be a (pattern, callback) pair, got {rule!r}")
        pattern, callback = rule
        if not isinstance(pattern, str | re.Pattern | Glob):
            raise ConfigError(f"{what}: {pattern!r} is not a pattern (a regex string, re.compile(...) or glob(...))")
        if callback is None:
            raise ConfigError(f"{what}: no callback")
        return compile_patterns([pattern], what), resolve(callback, spider, f"{what} callback")

    def requests(self) -> list[Request]:
        """The requests for ``sitemap_urls``."""
        return [Request(url, self._read) for url in self.urls]

    async def read(self, response: Response) -> AsyncIterator[Any]:  # Request | Refused
        """The requests a sitemap document leads to: sitemaps (robots.txt, index) or pages (urlset);
        those past the limits as :class:`Refused` (``sitemap too deep``, ``sitemap too many URLs``)."""
        max_depth, max_urls, robots_bytes = self._limits()
        depth = response.meta.get("sitemap_depth", 0)  # indexes above this document
        if response.url.partition("?")[0].endswith("/robots.txt"):
            for url in parse_robots(response.body, robots_bytes, response.url).sitemaps:
                request = _request(response.urljoin(url), self._read, depth)
                if request is not None:
                    yield request
            return
        sitemap = await asyncio.to_thread(read_sitemap, response.body, response.url, max_entries=max_urls)
        if sitemap.error:
            logger.warning(
                "sitemap %s is malformed (%s): read %d entries", response.url, sitemap.error, len(sitemap.entries)
            )
        index = sitemap.kind == "sitemapindex"
        for entry in sitemap.entries:
            if self._since is not None and entry.lastmod is not None and entry.lastmod < self._since:
                continue
            if index:
                if self._follow is None or self._follow.search(entry.loc):
                    request = _request(entry.loc, self._read, depth + 1)
                    if request is not None and depth + 1 > max_depth:
                        logger.warning(
                            "sitemap %s: %s is nested %d indexes deep, past sitemap_max_depth (%d): dropped",
                            response.url, entry.loc, depth + 1, max_depth,
                        )  # fmt: skip
                        yield Refused(request, "sitemap too deep")
                    elif request is not None:
                        yield request
                continue
            for request in self._pages(entry):
                yield request
        if sitemap.first_over is not None:
            yield self._too_many(response, sitemap, max_urls, index)

    def _pages(self, entry: Entry) -> Iterator[Request]:
        """The requests for a urlset entry's pages (its alternates too, if asked), those a rule takes."""
        for url in _urls(entry, self._alternates):
            callback = self._callback(url)
            if callback is not None:
                request = _request(url, callback)
                if request is not None:
                    yield request

    def _too_many(self, response: Response, sitemap: Sitemap, max_urls: int, index: bool) -> Refused:
        """The entries past ``sitemap_max_urls``: counted, and the first listed as dropped."""
        assert sitemap.first_over is not None
        self._owner.stats.counters["sitemap URLs past sitemap_max_urls"] += sitemap.over
        logger.warning(
            "sitemap %s lists %d URLs more than sitemap_max_urls (%d): dropped (sitemap too many URLs)",
            response.url, sitemap.over, max_urls,
        )  # fmt: skip
        loc = sitemap.first_over.loc
        callback = self._read if index else (self._callback(loc) or self._read)
        request = _request(loc, callback) or Request(response.url, self._read, dont_filter=True)
        return Refused(request, "sitemap too many URLs")

    def _limits(self) -> tuple[int, int, int]:
        """``sitemap_max_depth``, ``sitemap_max_urls`` and ``robots_max_bytes`` of the running crawl."""
        settings = self._owner.settings
        return settings.sitemap_max_depth, settings.sitemap_max_urls, settings.robots_max_bytes

    def _callback(self, url: str) -> Callable[..., Any] | None:
        """The callback of the first rule ``url`` matches (``None``: the page is not fetched)."""
        for pattern, callback in self._rules:
            if pattern is None or pattern.search(url):
                return callback
        return None


def _listed(value: Any, what: str) -> Sequence[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigError(f"{what}: sitemap_rules must be a list of (pattern, callback) pairs, got {value!r}")
    return value


def _since(value: Any, what: str) -> datetime | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str | date):
        raise ConfigError(f"{what}: sitemap_since must be a date, a datetime or an ISO date string, got {value!r}")
    since = parse_date(value)
    if since is None:
        raise ConfigError(f"{what}: sitemap_since {value!r} is not a date (2024-05-17 or 2024-05-17T10:00:00+00:00)")
    return since


def _flag(value: Any, what: str) -> bool:
    """A boolean attribute, which ``-a name=false`` gives as a string."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{what} must be true or false, got {value!r}")


def _urls(entry: Entry, alternates: bool) -> tuple[str, ...]:
    return (entry.loc, *entry.alternates) if alternates else (entry.loc,)


def _request(url: str, callback: Callable[..., Any], depth: int = 0) -> Request | None:
    """A request for a URL a sitemap lists (a sitemap ``depth`` indexes deep, kept in its meta);
    ``None`` (logged) if it is not an http(s) URL."""
    if not url[:8].lower().startswith(("http://", "https://")):
        logger.debug("sitemap entry %r skipped: not an absolute http(s) URL", url)
        return None
    try:
        return Request(url, callback, meta={"sitemap_depth": depth} if depth else None)
    except InvalidURL as exc:
        logger.debug("sitemap entry skipped: %s", exc)
        return None
