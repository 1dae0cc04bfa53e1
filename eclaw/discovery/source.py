"""Discovery sources: where a spider finds its pages, behind one small protocol.

A source gives the requests it starts with and reads the responses to the requests it
made for itself (a feed, a sitemap, an index); what it yields from them (page requests
with their own callbacks, items, drops) goes to the crawl like a callback's output. A
spider lists its sources in ``sources``; its link ``rules`` and its ``sitemap_urls`` are
sources too, built from those attributes, so a new kind of source needs no edit of
:class:`eclaw.spider.Spider`.

A spider may also name a registered source in ``sources`` as ``"NAME:ARGUMENT"`` (``-a`` friendly):
``eclaw.discovery_sources`` entry points, each a callable taking the argument (``feeds:URL`` is
``Feeds(URL)``); a plug-in package registers its own (docs/plugins.md).

A request a source makes with no callback is one it reads itself: the spider routes its
response back to the source's ``read`` (the spider's ``_parse_source`` callback, with the
source's position in ``meta["source"]``, so a saved crawl stores it by name).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from eclaw.discovery.rules import CrawlRules
from eclaw.discovery.sitemaps import Sitemaps
from eclaw.outputs.registry import DISCOVERY_SOURCES

if TYPE_CHECKING:
    from eclaw.http.request import Request
    from eclaw.http.response import Response
    from eclaw.settings import Settings
    from eclaw.stats import Stats

__all__ = ["DiscoverySource", "RuleSource", "SitemapSource", "SourceOwner", "named_source"]


class SourceOwner(Protocol):
    """What a source may use of its spider (:class:`eclaw.spider.Spider`): its name, the running
    crawl's settings and stats; a callback given by name is looked up on it."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def stats(self) -> Stats: ...


class DiscoverySource(Protocol):
    """A place a spider's pages are listed: link rules, sitemaps, feeds, or your own.

    ``start_requests`` gives the requests the source starts with (checked when the crawl
    starts, so a bad option fails before the first request); ``read`` is called with the
    response to each of them that has no callback, and to each such request ``read`` yields
    in turn. Both may yield :class:`eclaw.Request` objects, items, and
    :class:`eclaw.events.RequestDropped` drops, as a callback does.
    """

    def start_requests(self, spider: SourceOwner) -> Iterable[Request]: ...

    def read(self, response: Response, spider: SourceOwner) -> Iterable[object] | AsyncIterator[object]: ...


def named_source(text: str) -> DiscoverySource | None:
    """The source ``NAME:ARGUMENT`` names (``feeds:https://example.com/rss.xml``): the
    ``eclaw.discovery_sources`` entry point ``NAME`` called with ``ARGUMENT``; ``None`` when no source
    is registered under ``NAME`` (a plain URL)."""
    name, _, argument = text.partition(":")
    if name not in DISCOVERY_SOURCES:
        return None
    source: DiscoverySource = DISCOVERY_SOURCES.get(name)(argument)
    return source


class RuleSource:
    """A spider's link ``rules`` as a source: no start requests of their own (the default ``parse``
    follows them from the start pages), and the pages they find read by their rule."""

    def __init__(self, rules: CrawlRules) -> None:
        self.rules = rules

    def start_requests(self, spider: SourceOwner) -> Iterable[Request]:
        return ()

    def read(self, response: Response, spider: SourceOwner) -> Iterable[object] | AsyncIterator[object]:
        return self.rules.parse(response, response.meta.get("rule"))


class SitemapSource:
    """A spider's ``sitemap_urls`` as a source: the sitemaps are its start requests, and it reads
    robots.txt files, indexes and urlsets (docs/sitemaps.md)."""

    def __init__(self, sitemaps: Sitemaps) -> None:
        self.sitemaps = sitemaps

    def start_requests(self, spider: SourceOwner) -> Iterable[Request]:
        return self.sitemaps.requests()

    def read(self, response: Response, spider: SourceOwner) -> AsyncIterator[Any]:
        return self.sitemaps.read(response)
