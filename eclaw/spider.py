"""The Spider base class and loading spiders from files."""

from __future__ import annotations

import importlib.util
import inspect
import json
import logging
import sys
from collections.abc import AsyncIterable, AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from datetime import date
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from eclaw.discovery.links import Rule
from eclaw.discovery.patterns import UrlPattern
from eclaw.discovery.rules import CrawlRules
from eclaw.discovery.sitemaps import Sitemaps
from eclaw.discovery.source import DiscoverySource, RuleSource, SitemapSource, named_source
from eclaw.exceptions import ConfigError, EclawError, InvalidURL, SpiderLoadError
from eclaw.http import Request, Response
from eclaw.outputs.registry import DISCOVERY_SOURCES
from eclaw.settings import Settings
from eclaw.stats import Stats

__all__ = ["Spider", "iterate_start_requests", "load_spider", "load_spiders", "make_spider"]

logger = logging.getLogger(__name__)


class Spider:
    """Subclass this to describe a crawl.

    Class attributes:
        name: the spider's name (required).
        start_urls: URLs of the start requests, handed to ``parse``.
        allowed_domains: hosts (and their subdomains) the crawl may visit;
            empty means any host.
        custom_settings: setting overrides for this spider.
        middlewares: extra middlewares, inside the engine's.
        pipelines: item pipelines, run before the engine's outputs.
        handle_httpstatus_list: statuses >= 400 handed to callbacks instead
            of failing the request.
        item_key: key fields of the dict items this spider yields (the store
            upserts on them); declared item classes carry their own ``key``.
        required_fields: fields every dict item should have (checked at close).
        user_agent: the ``User-Agent`` of this spider's requests (over the setting and the
            ``UserAgent`` middleware's browser UA); robots.txt rules are matched for it.
        fetcher: how its requests are fetched unless they say otherwise: ``"plain"``
            (aiohttp, the default), or another fetcher's name (see :mod:`eclaw.fetchers`).
        rules: link rules (``eclaw.discovery.Rule``) the default ``parse`` follows (docs/rules.md).
        sitemap_urls: sitemaps, sitemap indexes or robots.txt files to start from; their pages
            go to the callbacks of ``sitemap_rules``, ``(pattern, callback)`` pairs (first match
            wins; default: every page to ``parse``). ``sitemap_follow``: patterns of the index
            entries to follow (default all); ``sitemap_since``: skip entries whose ``lastmod`` is
            older; ``sitemap_alternate_links``: follow ``hreflang`` alternates too (docs/sitemaps.md).
        sources: more discovery sources (:class:`eclaw.discovery.source.DiscoverySource`), such as
            ``Feeds("https://site.example/feed.xml", callback="parse_post")`` (docs/feeds.md); the
            ``rules`` and ``sitemap_urls`` are sources too, built from those attributes.
        http_auth: HTTP basic auth per host, ``{"host": ("user", "password")}`` (or
            ``"host:port"``): sent to that host only (over the ``http_auth`` setting).
        browser: the page actions of its rendered requests unless their ``meta["browser"]``
            says otherwise, key by key (see :mod:`eclaw.fetchers.browser.actions`).
        expect_items: names of callbacks that must yield at least one item per page
            (``{"parse_product"}``): a page that yields none fails with the reason ``no items``
            and an error snapshot is saved (docs/devloop.md); a request's
            ``meta["expect_items"]`` (true or false) wins over it.

        secret_args: names of arguments (``-a NAME=VALUE``) or attributes whose values are secrets:
            every record eclaw writes (logs, recordings, state, snapshots...) shows them as ``***``.
            Arguments whose names hold ``password``, ``passwd``, ``pass``, ``token``, ``secret``,
            ``key``, ``api_key``, ``apikey``, ``auth`` or ``credential`` (any case) are secret too
            (see :mod:`eclaw.security.redact`).

    Keyword arguments given to the constructor (CLI ``-a key=value``) become
    attributes, so a spider can take its start URL as an argument. A string given
    for a list attribute (``-a start_urls=https://a.example/,https://b.example/``)
    is split on commas, or read as JSON when it starts with ``[``.
    """

    name: ClassVar[str] = ""
    start_urls: Sequence[str] = ()
    allowed_domains: Sequence[str] = ()
    custom_settings: ClassVar[Mapping[str, Any]] = {}
    middlewares: Sequence[Callable[..., Any]] = ()  # eclaw.contracts.Middleware (or its class)
    pipelines: Sequence[Any] = ()  # eclaw.contracts.ItemPipeline, an async function (or a class)
    handle_httpstatus_list: Sequence[int] = ()
    item_key: Sequence[str] = ()
    required_fields: Sequence[str] = ()
    user_agent: str = ""
    fetcher: str = ""
    expect_items: Collection[str] = ()  # dev loop: callbacks that must yield items
    crawl: Any = None  # the running crawl (an eclaw.contracts.CrawlContext), set when the crawl starts
    # discovery (docs/rules.md, docs/sitemaps.md)
    rules: Sequence[Rule] = ()
    sitemap_urls: Sequence[str] = ()
    sitemap_rules: Sequence[tuple[UrlPattern, str | Callable[..., Any]]] = (("", "parse"),)
    sitemap_follow: Sequence[UrlPattern] = ()
    sitemap_since: date | str | None = None
    sitemap_alternate_links: bool = False
    sources: Sequence[DiscoverySource] = ()
    http_auth: Mapping[str, tuple[str, str]] = {}
    browser: ClassVar[Mapping[str, Any]] = {}
    secret_args: ClassVar[Sequence[str]] = ()  # argument names whose values are never written
    monitors: ClassVar[Sequence[Any]] = ()  # checks of the run (eclaw.monitors: ItemCount(min=...), ...)

    def __init__(self, **kwargs: Any) -> None:
        for key, value in kwargs.items():
            listed = isinstance(getattr(type(self), key, None), list | tuple)
            setattr(self, key, _as_list(key, value) if listed else value)
        self.logger = logging.getLogger(f"eclaw.spider.{self.name or type(self).__name__}")
        self._validate()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    @property
    def settings(self) -> Settings:
        """The running crawl's settings (the spider's ``custom_settings`` and ``-s`` applied)."""
        return self._running().settings  # type: ignore[no-any-return]

    @property
    def stats(self) -> Stats:
        """The running crawl's stats, as they are now."""
        return self._running().stats  # type: ignore[no-any-return]

    def _running(self) -> Any:
        if self.crawl is None:
            raise ConfigError(f"spider {self.name!r} is not crawling: settings and stats exist while it runs")
        return self.crawl

    def _validate(self) -> None:
        cls = type(self).__name__
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"spider {cls} has no name: set name = '...' on the class")
        for attr in ("start_urls", "allowed_domains", "handle_httpstatus_list"):
            value = getattr(self, attr)
            if isinstance(value, str | bytes) or not isinstance(value, Sequence | set | frozenset):
                raise ConfigError(f"spider {self.name!r}: {attr} must be a list, got {value!r}")
        domains = []
        for domain in self.allowed_domains:
            host = str(domain).strip().lower()
            if "://" in host or "/" in host:
                raise ConfigError(f"spider {self.name!r}: allowed_domains entry {domain!r} must be a host, not a URL")
            if host.count(":") == 1:  # as Scrapy, the port is not matched: say so rather than drop it unseen
                logger.warning("spider %r: allowed_domains entry %r: ports are ignored", self.name, domain)
                host = host.rsplit(":", 1)[0]
            domains.append(host)
        self.allowed_domains = domains
        for url in self.start_urls:
            check_start_url(Request(url).url)  # raises InvalidURL naming a malformed start URL
        if not isinstance(self.custom_settings, Mapping):
            raise ConfigError(f"spider {self.name!r}: custom_settings must be a dict")

    async def start_requests(self) -> AsyncIterator[Request]:
        """Yield the first requests: those of its discovery sources (one GET per ``sitemap_urls``
        entry, then those of ``sources``), then one per ``start_urls`` entry."""
        for index, source in enumerate(self._sources):  # built, and so checked, before the first request
            for request in source.start_requests(self):
                yield self._claimed(request, index)
        for url in self.start_urls:
            yield Request(url, dont_filter=True)  # as Scrapy's: neither offsite nor a duplicate

    def parse(self, response: Response) -> Any:
        """Default callback: follows the spider's ``rules``. Override it (or give requests a ``callback``)."""
        if self.rules:
            return self._crawl_rules.parse(response, None)
        raise ConfigError(f"spider {self.name!r} does not define parse(); got {response.url}")

    def is_banned(self, response: Response) -> bool:
        """Your own test of a ban (a login wall, a page of nothing but a notice...): the escalation
        ladder moves the page's host to a stronger fetcher, the ``Sessions`` middleware retires the
        session. Called on each response while one of them is in use; the default says never."""
        return False

    def _parse_rule(self, response: Response) -> Iterable[object] | AsyncIterator[object]:
        """Callback of the pages a rule found: the rule's callback, then (if it follows) the rules."""
        return self._rule_source.read(response, self)

    def _parse_sitemap(self, response: Response) -> AsyncIterator[Request]:
        """Callback of sitemap documents: robots.txt, sitemap indexes, urlsets."""
        return self._sitemap_source.read(response, self)

    async def _parse_source(self, response: Response) -> AsyncIterator[object]:
        """Callback of the requests a discovery source made for itself: read by that source."""
        index, sources = response.meta.get("source"), self._sources
        if not isinstance(index, int) or not 0 <= index < len(sources):
            raise ConfigError(
                f"request for {response.url} names source {index!r}; spider {self.name!r} has {len(sources)}"
            )
        async for value in iterate_start_requests(sources[index].read(response, self)):
            yield self._claimed(value, index)

    def _claimed(self, value: Any, index: int) -> Any:
        """A request a source made without a callback goes back to that source."""
        if isinstance(value, Request) and value.callback is None:
            value.callback = self._parse_source
            value.meta["source"] = index
        return value

    @cached_property
    def _sources(self) -> list[DiscoverySource]:
        """Its discovery sources: its rules, its sitemaps (from their attributes), then its ``sources``."""
        listed = self.sources
        if isinstance(listed, str | bytes) or not isinstance(listed, Sequence):
            raise ConfigError(f"spider {self.name!r}: sources must be a list (Feeds(...), ...), got {listed!r}")
        named: list[DiscoverySource] = []
        for index, source in enumerate(listed):
            found = named_source(source) if isinstance(source, str) else None
            if isinstance(source, str | bytes) and found is None:  # -a sources=URL: a URL is no source
                raise ConfigError(
                    f"spider {self.name!r}: sources[{index}] is {source!r}, not a source: Feeds(url), ..."
                    f" or NAME:ARGUMENT with NAME one of {', '.join(DISCOVERY_SOURCES.names())}"
                )
            named.append(found if found is not None else source)
        built: list[DiscoverySource] = []
        if self.rules:
            built.append(self._rule_source)
        if self.sitemap_urls:
            built.append(self._sitemap_source)
        return [*built, *named]

    @cached_property
    def _crawl_rules(self) -> CrawlRules:
        return CrawlRules(self)  # on first use: a spider's __init__ may set its rules

    @cached_property
    def _sitemaps(self) -> Sitemaps:
        return Sitemaps(self)

    @cached_property
    def _rule_source(self) -> RuleSource:
        return RuleSource(self._crawl_rules)

    @cached_property
    def _sitemap_source(self) -> SitemapSource:
        return SitemapSource(self._sitemaps)


def check_start_url(url: str) -> None:
    """A start URL must be one eclaw fetches: http(s) (a ``htp://`` typo would crawl nothing)."""
    if not url.startswith(("http://", "https://")):
        scheme = url.partition(":")[0]
        raise InvalidURL(f"start URL {url!r} has scheme {scheme!r}: eclaw crawls http:// and https:// URLs")


async def iterate_start_requests(produced: Any) -> AsyncIterator[Any]:
    """The values of what ``start_requests()`` returned: an (async) iterable, or an awaitable of one."""
    if inspect.isawaitable(produced):
        produced = await produced
    if isinstance(produced, AsyncIterable):
        async for value in produced:
            yield value
    elif isinstance(produced, Iterable):
        for value in produced:
            yield value
    elif produced is not None:
        raise ConfigError(f"start_requests() returned {type(produced).__name__}, not requests")


def _as_list(name: str, value: Any) -> Any:
    """A list attribute given as a string (``-a start_urls=a,b``): its items."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"spider argument {name}: not a JSON list ({exc.msg})") from None
    else:
        items = [part.strip() for part in text.split(",") if part.strip()]
    if name == "handle_httpstatus_list":
        try:
            return [int(item) for item in items]
        except ValueError:
            raise ConfigError(f"spider argument {name}: expected status codes, got {value!r}") from None
    return items


def make_spider(cls: type[Spider], args: Mapping[str, Any]) -> Spider:
    """``cls(**args)``; an error in the spider's own ``__init__`` is a one-line :class:`SpiderLoadError`."""
    try:
        return cls(**args)
    except EclawError:
        raise
    except Exception as exc:
        where = ""
        source = inspect.getsourcefile(cls)
        if source is not None:
            where = f" ({Path(source).name}{_error_line(exc, Path(source))})"
        raise SpiderLoadError(f"spider {cls.__name__}{where}: __init__ failed: {type(exc).__name__}: {exc}") from exc


def load_spiders(path: str | Path) -> list[type[Spider]]:
    """The ``Spider`` subclasses defined in the Python file ``path``."""
    module = import_file(path)
    return [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, Spider) and obj.__module__ == module.__name__
    ]


def import_file(path: str | Path, kind: str = "spider") -> ModuleType:
    """Import the Python file ``path`` as a fresh module; a one-line :class:`SpiderLoadError` if it cannot."""
    file = Path(path)
    if not file.is_file():
        raise SpiderLoadError(f"{kind} file not found: {file}")
    module_name = f"eclaw_spiders_{abs(hash(str(file.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise SpiderLoadError(f"cannot load {file}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        line = _error_line(exc, file)
        raise SpiderLoadError(f"error importing {file}{line}: {type(exc).__name__}: {exc}") from exc
    return module


def load_spider(spec: str) -> type[Spider]:
    """Load ``PATH.py`` (its one spider) or ``PATH.py:ClassName`` / ``PATH.py:name``."""
    path, wanted = spec, ""
    head, sep, tail = spec.rpartition(":")
    if sep and head.endswith(".py") and tail and "/" not in tail:
        path, wanted = head, tail
    spiders = load_spiders(path)
    if wanted:
        for cls in spiders:
            if wanted in (cls.__name__, cls.name):
                return cls
        names = ", ".join(cls.__name__ for cls in spiders) or "none"
        raise SpiderLoadError(f"no spider {wanted!r} in {path} (found: {names})")
    if not spiders:
        raise SpiderLoadError(f"no Spider subclass found in {path}")
    if len(spiders) > 1:
        names = ", ".join(cls.__name__ for cls in spiders)
        raise SpiderLoadError(f"several spiders in {path} ({names}): pick one with {path}:ClassName")
    return spiders[0]


def _error_line(exc: BaseException, file: Path) -> str:
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f" line {exc.lineno}"
    tb = exc.__traceback__
    lineno = None
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename) == file:
            lineno = tb.tb_lineno
        tb = tb.tb_next
    return f" line {lineno}" if lineno else ""
