"""RSS and Atom feeds as a discovery source: each entry's link, fetched with your callback.

``Feeds("https://site.example/feed.xml", callback="parse_post")`` in a spider's ``sources``
fetches the feeds and each entry's page. RSS 2.0 (``<item><link>``, else a permalink
``<guid>``), RSS 1.0 and Atom (``<entry><link rel="alternate" href>``, relative to
``xml:base`` and the feed's URL) are read by local names, so any namespace works. ``since``
skips entries whose date (Atom ``<updated>``/``<published>``, RSS ``<pubDate>``/``<dc:date>``)
is older; entries without one are kept. Documents are read off the event loop by lxml in
recover mode (entities unresolved, no DTD, no network), gzip'd ones inflated within the
sitemap protocol's 50 MiB, and at most ``max_entries`` entries are taken from one feed (default:
the ``sitemap_max_urls`` setting; the rest counted, the first listed as dropped: ``feed too
many entries``).
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urljoin

from lxml import etree

from eclaw.discovery.links import resolve
from eclaw.discovery.sitemap_xml import _BARE_AMPERSAND, MAX_SITEMAP_SIZE, gunzip, parse_date
from eclaw.discovery.sitemaps import Refused
from eclaw.discovery.source import SourceOwner
from eclaw.exceptions import ConfigError, InvalidURL
from eclaw.http.request import Request
from eclaw.http.response import Response

__all__ = ["Feed", "FeedEntry", "Feeds", "read_feed"]

logger = logging.getLogger(__name__)

_XML_BASE = "{http://www.w3.org/XML/1998/namespace}base"
_ENTRIES = frozenset({"item", "entry"})


@dataclass(frozen=True, slots=True)
class FeedEntry:
    """One ``<item>`` (RSS) or ``<entry>`` (Atom): its absolute link and its date, if it has one."""

    link: str
    updated: datetime | None = None


@dataclass(frozen=True, slots=True)
class Feed:
    """A parsed feed: its kind (``rss``, ``atom``, ``rdf``, or ``""`` when it is none), its first
    ``max_entries`` entries, ``over`` the entries past them (``first_over`` the first of those)."""

    kind: str
    entries: list[FeedEntry]
    over: int = 0
    first_over: FeedEntry | None = None


def read_feed(body: bytes, url: str, max_entries: int | None = None) -> Feed:
    """The RSS or Atom feed in ``body`` (gzip'd or not), links made absolute against ``url``."""
    data = gunzip(body, MAX_SITEMAP_SIZE, url) if body.startswith(b"\x1f\x8b") else body[:MAX_SITEMAP_SIZE]
    data = data.lstrip()
    if b"&" in data:  # an unescaped "&" in a link: escaped, or recovery would cut the link short
        data = _BARE_AMPERSAND.sub(b"&amp;", data)
    events = etree.iterparse(
        io.BytesIO(data), events=("start", "end"), resolve_entities=False, no_network=True,
        load_dtd=False, remove_comments=True, remove_pis=True, huge_tree=False, recover=True,
    )  # fmt: skip
    kinds = {"rss": "rss", "feed": "atom", "RDF": "rdf"}
    kind, root = "", None
    entries: list[FeedEntry] = []
    over, first_over = 0, None
    try:
        for event, element in events:
            name = _local(element.tag)
            if root is None:
                root, kind = element, kinds.get(name, "")
                if not kind:
                    break
            elif event == "end" and name in _ENTRIES:
                entry = _entry(element, url)
                if entry is not None and (max_entries is None or len(entries) < max_entries):
                    entries.append(entry)
                elif entry is not None:
                    over += 1
                    first_over = first_over or entry
                _forget(element)
    except etree.XMLSyntaxError as exc:  # past what recover mode mends: the entries read are kept
        logger.warning("feed %s is malformed (%s): read %d entries", url, exc, len(entries))
    return Feed(kind, entries, over, first_over)


def _forget(element: Any) -> None:
    """Drop an entry read, and what came before it, so memory stays flat on a long feed."""
    element.clear(keep_tail=True)
    parent = element.getparent()
    while parent is not None and element.getprevious() is not None:
        del parent[0]


def _local(tag: Any) -> str:
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _base(element: Any, url: str) -> str:
    """The URL relative links of ``element`` resolve against: ``url`` with each ``xml:base`` above it."""
    bases = []
    node = element
    while node is not None:
        if node.get(_XML_BASE):
            bases.append(node.get(_XML_BASE).strip())
        node = node.getparent()
    for base in reversed(bases):
        url = urljoin(url, base)
    return url


def _entry(element: Any, url: str) -> FeedEntry | None:
    link = guid = ""
    dates: dict[str, datetime | None] = {}
    for child in element:
        name = _local(child.tag)
        if name == "link" and child.get("href") is not None:  # Atom: the alternate link
            if child.get("rel", "alternate") == "alternate" and not link:
                link = urljoin(_base(child, url), child.get("href").strip())
        elif name == "link" and not link and (child.text or "").strip():  # RSS
            link = urljoin(_base(child, url), child.text.strip())
        elif name == "guid" and child.get("isPermaLink", "true") == "true":
            guid = (child.text or "").strip()
        elif name in ("updated", "published", "pubDate", "date", "modified"):
            dates[name] = _date(child.text or "")
    link = link or (urljoin(_base(element, url), guid) if guid else "")
    updated = next((dates[n] for n in ("updated", "modified", "pubDate", "date", "published") if dates.get(n)), None)
    return FeedEntry(link, updated) if link else None


def _date(text: str) -> datetime | None:
    """An RSS date (RFC 822: ``Tue, 04 Jun 2024 10:00:00 GMT``) or an Atom one (RFC 3339)."""
    text = text.strip()
    if text[:1].isalpha() or "," in text:
        try:
            return parse_date(parsedate_to_datetime(text))
        except (TypeError, ValueError):
            return None
    return parse_date(text)


class Feeds:
    """RSS and Atom feeds as a spider's discovery source (put it in ``sources``).

    Args:
        *urls: the feeds' URLs.
        callback: what each entry's page is handed to: a spider method or its name (default ``parse``).
        since: skip entries dated before it (a date, an aware datetime, or an ISO string).
        max_entries: entries taken from one feed at most (default: the ``sitemap_max_urls`` setting).
    """

    def __init__(
        self,
        *urls: str,
        callback: str | Callable[..., Any] = "parse",
        since: date | str | None = None,
        max_entries: int | None = None,
    ) -> None:
        if not urls or any(not isinstance(url, str) for url in urls):
            raise ConfigError(f"Feeds(...) takes the feeds' URLs as strings, got {urls!r}")
        self.urls = [Request(url).url for url in urls]  # a malformed one: InvalidURL, naming it
        for url in self.urls:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"feed URL {url!r} is not an http(s) URL")
        if callback is None:
            raise ConfigError("Feeds(callback=None): name the method that reads each entry's page")
        self.callback = callback
        if since not in (None, "") and not isinstance(since, str | date):
            since = repr(since)  # not a date: named in the error below
        self.since = None if since in (None, "") else parse_date(since)
        if since not in (None, "") and self.since is None:
            raise ConfigError(f"Feeds(since={since!r}): not a date (2024-05-17 or 2024-05-17T10:00:00+00:00)")
        if max_entries is not None and (not isinstance(max_entries, int) or max_entries < 0):
            raise ConfigError(f"Feeds(max_entries={max_entries!r}): expected a whole number >= 0")
        self.max_entries = max_entries

    def __repr__(self) -> str:
        return f"Feeds({', '.join(map(repr, self.urls))}, callback={self.callback!r})"

    def start_requests(self, spider: SourceOwner) -> Iterable[Request]:
        """One request per feed, read by :meth:`read` (no callback: the source's own)."""
        resolve(self.callback, spider, f"spider {spider.name!r} Feeds callback")  # a bad name fails at start
        return [Request(url, dont_filter=True) for url in self.urls]

    async def read(self, response: Response, spider: SourceOwner) -> AsyncIterator[Any]:  # Request | Refused
        """The requests for the entries of the feed in ``response``, those past the cap as :class:`Refused`."""
        callback = resolve(self.callback, spider, f"spider {spider.name!r} Feeds callback")
        cap = self.max_entries if self.max_entries is not None else spider.settings.sitemap_max_urls
        feed = await asyncio.to_thread(read_feed, response.body, response.url, cap)
        if not feed.kind:
            logger.warning("%s is not an RSS or Atom feed: no entries read", response.url)
        for entry in feed.entries:
            if self.since is not None and entry.updated is not None and entry.updated < self.since:
                continue
            request = _request(entry.link, callback)
            if request is not None:
                yield request
        if feed.first_over is not None:
            spider.stats.counters["feed entries past the cap"] += feed.over
            logger.warning(
                "feed %s lists %d entries more than its cap (%d): dropped (feed too many entries)",
                response.url, feed.over, cap,
            )  # fmt: skip
            request = _request(feed.first_over.link, callback) or Request(response.url, dont_filter=True)
            yield Refused(request, "feed too many entries")


def _request(url: str, callback: Callable[..., Any]) -> Request | None:
    if not url[:8].lower().startswith(("http://", "https://")):
        logger.debug("feed entry %r skipped: not an http(s) URL", url)
        return None
    try:
        return Request(url, callback)
    except InvalidURL as exc:
        logger.debug("feed entry skipped: %s", exc)
        return None
