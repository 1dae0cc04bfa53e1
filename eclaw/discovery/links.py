"""Link rules: which links of a page to follow, decided once per link by compiled patterns.

A :class:`Rule` names the links of a page (``<a href>`` and ``<area href>``, optionally only
inside ``restrict_css``/``restrict_xpaths`` regions) and keeps those that pass its filters,
in this order: a file extension that is not a page (``deny_extensions``), the host
(``strategy``, ``allow_domains``, ``deny_domains``), ``deny`` patterns, then ``allow``
patterns. Links are made absolute (``<base href>`` honoured), their fragment dropped, and
each URL is kept once per page; links that are not http(s) (``mailto:``, ``javascript:``)
are never kept. The same rule object serves a spider's ``rules`` (see
:mod:`eclaw.discovery.rules`) and ``response.follow_all(rule=...)``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field
from functools import lru_cache
from typing import Any, Literal

from lxml import etree
from parsel import Selector
from parsel.csstranslator import css2xpath

from eclaw.discovery.hrefs import streamed_hrefs
from eclaw.discovery.patterns import UrlPattern, compile_patterns, extensions, patterns
from eclaw.exceptions import ConfigError, InvalidURL
from eclaw.http.request import Request, plain_request
from eclaw.http.response import LinkRule, Response, encoded_link, register_rule_links
from eclaw.http.suffixes import registered_domain
from eclaw.http.types import Callback
from eclaw.http.urls import absolute_url, host_allowed, join_url, simple_path, url_host

__all__ = [
    "SEEN_PER_PAGE",
    "STRATEGIES",
    "Page",
    "Rule",
    "Strategy",
    "follow_links",
    "iter_links",
    "kept",
    "page_links",
    "registered_domain",
    "resolve",
]

logger = logging.getLogger(__name__)

Strategy = Literal["same-host", "same-domain", "any"]
STRATEGIES: tuple[Strategy, ...] = ("same-host", "same-domain", "any")
ProcessRequest = Callable[[Request, "Response"], Request | None]
_NAME = re.compile(r"[A-Za-z_][\w.\-]*\Z")


@dataclass(frozen=True, slots=True)
class Rule:
    """Which links of a page to follow, and (in a spider's ``rules``) what to do with them.

    Args:
        allow: patterns a link must match (any of them): regular expressions searched in
            the absolute URL, or :func:`~eclaw.discovery.glob` patterns; empty allows every link.
        deny: patterns that exclude a link (they win over ``allow``).
        allow_domains: hosts (and their subdomains) links may point to.
        deny_domains: hosts (and their subdomains) links must not point to.
        restrict_css: CSS selectors of the regions to take links from (a ``nav``, a list).
        restrict_xpaths: XPath expressions of such regions.
        strategy: ``"same-host"`` (the default: links to the page's own host), ``"same-domain"``
            (the page's registrable domain and its subdomains, by the Public Suffix List),
            or ``"any"``.
        deny_extensions: file extensions never followed (default
            :data:`~eclaw.discovery.DEFAULT_DENY_EXTENSIONS`: archives, images, audio, video,
            PDF and office documents, fonts, scripts); ``()`` follows them all.
        tags: elements links are taken from.
        attrs: attributes of those elements holding the URL.
        callback: what handles the pages it follows (a spider method's name, or a callable).
        follow: in a spider's ``rules``, also apply the rules to those pages (default: true
            without a callback, false with one, as in Scrapy's CrawlSpider).
        process_request: ``f(request, response)`` returning the request to send (changed or
            not) or ``None`` to skip it; a spider method's name or a callable.
        cb_kwargs: keyword arguments for the callback.
        errback: called when one of its requests finally fails (a spider method's name or a callable).
    """

    allow: UrlPattern | Sequence[UrlPattern] = ()
    _: KW_ONLY
    deny: UrlPattern | Sequence[UrlPattern] = ()
    allow_domains: str | Sequence[str] = ()  # one host alone too, as Scrapy's LinkExtractor takes it
    deny_domains: str | Sequence[str] = ()
    restrict_css: str | Sequence[str] = ()
    restrict_xpaths: str | Sequence[str] = ()
    strategy: Strategy = "same-host"
    deny_extensions: Iterable[str] | None = None
    tags: Sequence[str] = ("a", "area")
    attrs: Sequence[str] = ("href",)
    callback: str | Callback | None = None
    follow: bool | None = None
    process_request: str | ProcessRequest | None = None
    cb_kwargs: dict[str, Any] | None = None
    errback: str | Callback | None = None
    _allow: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)
    _deny: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)
    _extensions: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())
    _allowed: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())
    _denied: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())
    _source: str = field(init=False, repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        what = f"Rule(allow={self.allow!r})" if self.allow else "Rule()"
        setting = object.__setattr__
        setting(self, "_allow", compile_patterns(patterns(self.allow, what + " allow"), what + " allow"))
        setting(self, "_deny", compile_patterns(patterns(self.deny, what + " deny"), what + " deny"))
        setting(self, "_extensions", extensions(self.deny_extensions, what + " deny_extensions"))
        setting(self, "_allowed", _hosts(self.allow_domains, what, "allow_domains"))
        setting(self, "_denied", _hosts(self.deny_domains, what, "deny_domains"))
        if self.strategy not in STRATEGIES:
            choices = ", ".join(repr(s) for s in STRATEGIES)
            raise ConfigError(f"{what}: strategy must be one of {choices}, got {self.strategy!r}")
        if self.follow is not None and not isinstance(self.follow, bool):
            raise ConfigError(f"{what}: follow must be True or False, got {self.follow!r}")
        for name in ("callback", "process_request", "errback"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str) and not callable(value):
                raise ConfigError(f"{what}: {name} must be a method name or a callable, got {value!r}")
        setting(self, "_source", _source(self, what))

    @property
    def follows(self) -> bool:
        """Whether the pages it finds get the rules applied too (``follow``, or its default)."""
        return self.callback is None if self.follow is None else self.follow

    def replace(self, **changes: Any) -> Rule:
        """A copy with ``changes`` applied (checked like a new rule)."""
        return dataclasses.replace(self, **changes)

    def skips(self, url: str, page: str | None = None) -> str | None:
        """Why the rule would not follow ``url`` (an absolute URL) found on ``page``, or ``None`` if
        it would: ``"extension .pdf"``, ``"other host"``, ``"other domain"``, ``"denied domain"``,
        ``"domain not allowed"``, ``"deny pattern"`` or ``"no allow pattern"``. For testing rules."""
        url = absolute_url(url.partition("#")[0])
        page = page if page is not None else url
        return self._verdict(url, Page(page))

    def _verdict(self, url: str, page: Page) -> str | None:
        """The filter applied to each link: the reason it is skipped, or ``None``."""
        if self._extensions:
            ext = _extension(url)
            if ext and ext in self._extensions:
                return "extension ." + ext
        allowed, denied = self._allowed, self._denied
        if self.strategy != "any" or allowed or denied:
            same = url.startswith(page.prefix)
            host = page.host if same else url_host(url)
            if self.strategy == "same-host" and not same and host != page.host:
                return "other host"
            if self.strategy == "same-domain" and not same and registered_domain(host) != page.domain:
                return "other domain"
            if denied and host_allowed(host, denied):
                return "denied domain"
            if allowed and not host_allowed(host, allowed):
                return "domain not allowed"
        if self._deny is not None and self._deny.search(url):
            return "deny pattern"
        if self._allow is not None and not self._allow.search(url):
            return "no allow pattern"
        return None


def _hosts(value: str | Sequence[str], what: str, name: str) -> frozenset[str]:
    hosts = frozenset(str(host).strip().lower() for host in ((value,) if isinstance(value, str) else value))
    for host in hosts:
        if not host or "/" in host:
            raise ConfigError(f"{what}: {name} entry {host!r} must be a host, not a URL")
    return hosts


def _source(rule: Rule, what: str) -> str:
    """The XPath of the URLs a rule takes from a page (its regions, tags and attributes)."""
    regions = [rule.restrict_css] if isinstance(rule.restrict_css, str) else list(rule.restrict_css)
    xpaths = [rule.restrict_xpaths] if isinstance(rule.restrict_xpaths, str) else list(rule.restrict_xpaths)
    if isinstance(rule.tags, str) or isinstance(rule.attrs, str):
        raise ConfigError(f"{what}: tags and attrs must be lists of names")
    for name in (*rule.tags, *rule.attrs):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"{what}: {name!r} is not an element or attribute name")
    if not rule.tags or not rule.attrs:
        raise ConfigError(f"{what}: tags and attrs must not be empty")
    try:
        parts = [css2xpath(css) for css in regions] + list(xpaths)
        prefix = f"({' | '.join(parts)})/" if parts else ""
        steps = " | ".join(f"{prefix}descendant-or-self::{tag}" for tag in rule.tags)
        attrs = (
            f"@{rule.attrs[0]}"
            if len(rule.attrs) == 1
            else "@*[" + " or ".join(f"name()='{a}'" for a in rule.attrs) + "]"
        )
        source = f"({steps})/{attrs}"
        _xpath(source)
    except Exception as exc:  # cssselect's and lxml's own errors: name the region
        raise ConfigError(f"{what}: bad restrict_css/restrict_xpaths {regions + xpaths!r}: {exc}") from None
    return source


@lru_cache(maxsize=256)
def _xpath(source: str) -> etree.XPath:
    return etree.XPath(source, smart_strings=False)


def _extension(url: str) -> str:
    """The file extension of the URL's last path segment, lower-case ("" for none)."""
    path = url.partition("?")[0]
    dot = path.rfind(".")
    slash = path.rfind("/")
    if dot < slash or slash <= path.find("://") + 2:  # none in the last segment, or no path at all
        return ""
    return path[dot + 1 :].lower()


class Page:
    """What filtering needs of the page links are found on."""

    __slots__ = ("_domain", "host", "prefix")

    def __init__(self, url: str) -> None:
        self.host = url_host(url)
        scheme, _, rest = url.partition("://")
        self.prefix = f"{scheme}://{rest.split('/', 1)[0].split('?', 1)[0]}/"
        self._domain: str | None = None

    @property
    def domain(self) -> str:
        if self._domain is None:
            self._domain = registered_domain(self.host)
        return self._domain


def page_links(response: Response, rule: Rule, hrefs: Iterable[Any] | None = None) -> list[str]:
    """The absolute, fragment-free http(s) URLs of ``response``'s links (``hrefs``, else those the
    rule's regions, tags and attributes name), each once, in page order — before filtering."""
    return list(iter_links(response, rule, hrefs))


def iter_links(response: Response, rule: Rule, hrefs: Iterable[Any] | None = None) -> Iterator[str]:
    """:func:`page_links` as they are found. On an HTML page over 1 MiB, the links a rule takes by tag
    and attribute alone (no ``restrict_css``/``restrict_xpaths``) are read as the page is parsed,
    without building its tree (unless it was built already): a page of 400,000 links costs little
    more memory than its body."""
    if hrefs is None:
        response._require_text()
        if response._is_xml:
            hrefs = response.xpath(rule._source).getall()
        elif len(response.body) > _STREAM_ABOVE and not _tree_needed(response, rule):
            hrefs = streamed_hrefs(response, rule.tags, rule.attrs)  # a huge page: no tree of it
        else:
            hrefs = _xpath(rule._source)(response._root)
    base, origin = response._base
    fast = base == response.url
    seen: set[int] = set()  # hashes of the first SEEN_PER_PAGE: a huge page's repeats are the frontier's
    for item in hrefs:
        href = item if type(item) is str else _href(item)
        if not href:
            continue
        url: str | None
        if fast and simple_path(href):  # the common link: already safe, same origin
            url = origin + (href.partition("#")[0] if "#" in href else href)
        else:
            url = _absolute(base, origin, href, response)
        if url is not None:
            key = hash(url)
            if key not in seen:
                if len(seen) < SEEN_PER_PAGE:
                    seen.add(key)
                yield url


def _tree_needed(response: Response, rule: Rule) -> bool:
    """Whether the rule's links are taken from the page's tree: it has regions, or the tree exists."""
    return bool(rule.restrict_css or rule.restrict_xpaths) or "_root" in response.__dict__


def _absolute(base: str, origin: str, href: str, response: Response) -> str | None:
    """``href`` as an absolute http(s) URL (its query in the page's encoding, as browsers send it), or ``None``."""
    joined = join_url(base, origin, href.strip()).partition("#")[0]
    if not joined[:8].lower().startswith(("http://", "https://")):
        return None  # mailto:, javascript:, tel:, data: ... are not pages
    try:
        return absolute_url(encoded_link(joined, response))
    except InvalidURL:
        logger.debug("skipped malformed link %r on %s", href, response.url)
        return None


# Pages larger than this have their links read without a tree: libxml2's tree costs ~700 bytes a
# link, and on a page of ordinary size the tree (which the callback usually builds anyway) is faster.
_STREAM_ABOVE = 1024 * 1024
# A page's URLs remembered to keep each once: past that many, a repeat goes to the frontier, whose
# dupe filter drops it (counted as a duplicate), so a page of 400,000 links costs no set of them all.
SEEN_PER_PAGE = 65_536


def _href(link: Any) -> str | None:
    """The URL in an element, an attribute or text selector, or an ``<a>`` selector."""
    if isinstance(link, etree._Element):
        href = link.get("href")
        return href if isinstance(href, str) else None
    if isinstance(link, Selector):
        return link.root.strip() if isinstance(link.root, str) else link.attrib.get("href")
    raise TypeError(f"cannot follow {link!r}: expected a URL string or a link element")


def kept(rule: Rule, response: Response, urls: Iterable[str]) -> Iterable[str]:
    """The ``urls`` found on ``response`` that ``rule`` follows."""
    page = Page(response.url)
    verdict = rule._verdict
    return [url for url in urls if verdict(url, page) is None]


def resolve(value: Any, owner: object | None, what: str) -> Any:
    """A rule's callback-like field: a callable as is, a name looked up on ``owner`` (the spider)."""
    if value is None or callable(value):
        return value
    if owner is None:
        raise ConfigError(f"{what} {value!r} is a method name: outside a spider's rules, pass the method itself")
    method = getattr(owner, value, None)
    if not callable(method):
        raise ConfigError(f"{what} {value!r}: spider {type(owner).__name__} has no such method")
    return method


# follow_all's keywords that make a rule; its callback, errback and cb_kwargs stay the requests' own
RULE_OPTIONS = frozenset(f.name for f in dataclasses.fields(Rule) if f.init) - {
    "callback",
    "follow",
    "errback",
    "cb_kwargs",
}


def follow_links(
    response: Response,
    urls: Iterable[Any] | None,
    callback: Callback | None,
    css: str | None,
    xpath: str | None,
    rule: LinkRule | None,
    options: dict[str, Any],
) -> list[Request]:
    """``response.follow_all`` with a rule, or with rule keywords (``allow=``, ``deny=``...)."""
    given = {name: options.pop(name) for name in list(options) if name in RULE_OPTIONS}
    if rule is not None and given:
        raise TypeError(f"follow_all() takes rule= or rule options ({', '.join(sorted(given))}), not both")
    if rule is None:
        rule = Rule(**given)
    elif not isinstance(rule, Rule):
        raise TypeError(f"follow_all(rule=...) takes an eclaw.discovery.Rule, got {rule!r}")
    hrefs = None
    if urls is not None or css is not None or xpath is not None:
        if rule.restrict_css or rule.restrict_xpaths:
            raise TypeError("follow_all(): give urls/css/xpath or a rule with restrict_css/restrict_xpaths, not both")
        hrefs = response._links(urls, css, xpath)
    callback = callback or resolve(rule.callback, None, "Rule callback")
    if "errback" not in options and rule.errback is not None:
        options["errback"] = resolve(rule.errback, None, "Rule errback")
    if "cb_kwargs" not in options and rule.cb_kwargs:
        options["cb_kwargs"] = dict(rule.cb_kwargs)
    process = resolve(rule.process_request, None, "Rule process_request")
    requests = []
    page, verdict = Page(response.url), rule._verdict
    for url in iter_links(response, rule, hrefs):
        if verdict(url, page) is not None:
            continue
        request = Request(url, callback, _safe=True, **options) if options else plain_request(url, callback)
        if process is not None:
            request = process(request, response)
            if request is None:
                continue
        requests.append(request)
    return requests


register_rule_links(follow_links)
