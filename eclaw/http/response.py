"""A downloaded response: its text (in the right encoding), selectors, and links to follow."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, overload
from urllib.parse import urljoin

from lxml import etree
from multidict import CIMultiDict, CIMultiDictProxy
from w3lib.url import safe_url_string

from eclaw.exceptions import NotTextResponse
from eclaw.http.charsets import BOMS, declared_charset, decoded
from eclaw.http.iterators import csv_rows, xml_nodes
from eclaw.http.mediatypes import binary_kind
from eclaw.http.request import Request, plain_request
from eclaw.http.selectors import compiled_css, compiled_hrefs, compiled_xpath, parse_html, uses_id, wrap
from eclaw.http.types import Callback
from eclaw.http.urls import join_url, simple_path

if TYPE_CHECKING:
    from bs4 import BeautifulSoup
    from parsel import Selector, SelectorList

    from eclaw.http.wire import Received
    from eclaw.text import Markdown, Page

__all__ = ["LinkRule", "Response", "RuleLinks", "register_rule_links"]

T = TypeVar("T")
_BASE_TAG = re.compile(rb"<base[\s>/]", re.I)
# follow_all's keywords that make a link rule (eclaw.discovery.Rule's link options; a test keeps them in step)
RULE_KEYWORDS = frozenset(
    {"allow", "deny", "allow_domains", "deny_domains", "restrict_css", "restrict_xpaths", "strategy",
     "deny_extensions", "tags", "attrs", "process_request"}
)  # fmt: skip


class LinkRule(Protocol):
    """What ``follow_all(rule=...)`` takes: a link rule, :class:`eclaw.discovery.Rule`."""

    def skips(self, url: str, page: str | None = None) -> str | None: ...


# follow_all with a rule: (response, urls, callback, css, xpath, rule, request options) -> requests
RuleLinks = Callable[
    ["Response", Iterable[Any] | None, Callback | None, str | None, str | None, LinkRule | None, dict[str, Any]],
    list[Request],
]
# Link rules are eclaw.discovery's, a layer above this one: it registers how follow_all applies them
# when it is imported (``import eclaw`` imports it), so this module never imports it.
_rule_links: RuleLinks | None = None


def register_rule_links(follow: RuleLinks) -> None:
    """Make ``follow``, eclaw.discovery's, what ``Response.follow_all`` runs given a rule or rule keywords."""
    global _rule_links
    _rule_links = follow


class lazy(Generic[T]):
    """``functools.cached_property`` without the lock Python 3.11 takes on each first access
    (a response computes several of these once per page)."""

    def __init__(self, func: Callable[[Any], T]) -> None:
        self._func = func
        self._name = func.__name__
        self.__doc__ = func.__doc__

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> lazy[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | lazy[T]:
        if instance is None:
            return self
        value = instance.__dict__[self._name] = self._func(instance)
        return value


class Response:
    """A downloaded response.

    ``url`` is the URL that was fetched (the last one, after redirects), without a
    fragment: the fragment is never sent to the server, so the same page has one
    ``url`` whichever ``#anchor`` the link that reached it carried. The request's
    URL as written, fragment included, stays in ``request.url``.

    ``text`` is decoded with the charset from the Content-Type header, a BOM,
    an HTML ``<meta>`` declaration, then detection, in the order browsers use.
    Selectors (``css``/``xpath``, lxml via parsel) and ``soup`` (BeautifulSoup
    on lxml) are built lazily on first use.
    """

    __slots__ = ("__dict__", "body", "from_cache", "headers", "request", "status", "url")
    received: Received | None = None  # the exchange as on the wire, when kept (:mod:`eclaw.http.wire`)

    def __init__(
        self,
        url: str,
        *,
        status: int = 200,
        headers: Mapping[str, str] | CIMultiDictProxy[str] | None = None,
        body: bytes = b"",
        request: Request | None = None,
        from_cache: bool = False,
    ) -> None:
        self.url = url.partition("#")[0]
        self.status = status
        self.from_cache = from_cache
        self.headers: CIMultiDictProxy[str] = (
            headers if isinstance(headers, CIMultiDictProxy) else CIMultiDictProxy(CIMultiDict(headers or {}))
        )
        self.body = body
        self.request = request if request is not None else Request(url)

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.url}>"

    @property
    def meta(self) -> dict[str, Any]:
        """The ``meta`` dict of the request that produced this response."""
        return self.request.meta

    @lazy
    def encoding(self) -> str:
        """The charset used to decode ``text``."""
        if self._declared == "utf-8" and not self.body.startswith(BOMS):
            return "utf-8"  # known without decoding the body (lxml parses the bytes)
        return self._decoded[0]

    @lazy
    def text(self) -> str:
        """The body decoded to ``str``."""
        return self._decoded[1]

    @lazy
    def _declared(self) -> str | None:
        """The charset the Content-Type header, else the document, declares."""
        return declared_charset(self.headers.get("Content-Type", ""), self.body)

    @lazy
    def _decoded(self) -> tuple[str, str]:
        return decoded(self.headers.get("Content-Type", ""), self.body, self._declared)

    @lazy
    def is_text(self) -> bool:
        """False for a binary body (PDF, image, archive, font, media, octet stream: by its
        Content-Type or, whatever the header says, by its first bytes); selectors refuse those."""
        return self._binary_kind is None

    @lazy
    def _binary_kind(self) -> str | None:
        """What makes the body binary (its media type, or what its bytes sniff as), or ``None``."""
        return binary_kind(self.headers.get("Content-Type", ""), self.body)

    def _require_text(self) -> None:
        kind = self._binary_kind
        if kind is not None:
            raise NotTextResponse(self.url, kind)

    @lazy
    def _is_xml(self) -> bool:
        ctype = self.headers.get("Content-Type", "")
        return "xml" in ctype and "html" not in ctype

    @lazy
    def _root(self) -> Any:
        return self._parsed(ids=False)

    @lazy
    def _root_with_ids(self) -> Any:
        """The document parsed again with its id table, for XPath queries that call ``id()``."""
        return self._parsed(ids=True)

    def _parsed(self, *, ids: bool) -> Any:
        self._require_text()
        encoding = self.encoding
        return parse_html(self.body, encoding, "" if encoding == "utf-8" else self.text, self.url, ids=ids)

    def _tree(self, xpath: str) -> Any:
        return self._root_with_ids if uses_id(xpath) else self._root

    @lazy
    def selector(self) -> Selector:
        """The parsel ``Selector`` over the document (lxml underneath). For XML, its names are
        without namespaces, so ``//loc`` and ``loc::text`` match a namespaced sitemap or feed."""
        from parsel import Selector

        self._require_text()
        if self._is_xml:
            selector = Selector(text=self.text, type="xml", base_url=self.url)
            selector.remove_namespaces()  # an unprefixed name never matches a namespaced element
            return selector
        return Selector(root=self._root, type="html", base_url=self.url)

    @lazy
    def _namespaced(self) -> Selector:
        """The XML document as written, with the prefixes its root declares."""
        from parsel import Selector

        self._require_text()
        selector = Selector(text=self.text, type="xml", base_url=self.url)
        selector.namespaces.update((prefix, uri) for prefix, uri in selector.root.nsmap.items() if prefix)
        return selector

    def css(self, query: str) -> SelectorList[Selector]:
        """CSS query (with ``::text`` and ``::attr(name)``), e.g. ``css("h1::text").get()``."""
        if self._is_xml:
            return self.selector.css(query)
        return wrap(compiled_css(query)(self._root), query)

    def xpath(
        self, query: str, namespaces: Mapping[str, str] | None = None, **variables: Any
    ) -> SelectorList[Selector]:
        """XPath query, e.g. ``xpath("//a/@href").getall()``; keywords are XPath variables.

        On XML, names match without namespaces (``//url/loc``); with ``namespaces`` (prefix to
        URI, added to those the document declares) the query runs on the document as written:
        ``xpath("//sm:loc", namespaces={"sm": "http://www.sitemaps.org/schemas/sitemap/0.9"})``.
        """
        if namespaces is not None:
            source = self._namespaced if self._is_xml else self.selector
            return source.xpath(query, namespaces=namespaces, **variables)
        if self._is_xml:
            return self.selector.xpath(query, **variables)
        return wrap(compiled_xpath(query)(self._tree(query), **variables), query)

    @lazy
    def soup(self) -> BeautifulSoup:
        """BeautifulSoup tree on the lxml parser, built on first access."""
        from bs4 import BeautifulSoup

        self._require_text()
        return BeautifulSoup(self.text, "lxml")

    def markdown(self) -> Markdown:
        """The page's main content as markdown: boilerplate (nav, sidebars, footer) dropped; headings,
        lists, tables, code kept; with ``.page_title``, ``.language``, ``.chunks()`` (:mod:`eclaw.text`,
        ``pip install 'eclaw[text]'``)."""
        return self._text_page.markdown

    def main_text(self) -> str:
        """The page's main content as plain text (see :meth:`markdown`)."""
        return self._text_page.text

    @lazy
    def _text_page(self) -> Page:
        from eclaw.text.extract import extract_page

        self._require_text()
        return extract_page(self)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.text)

    def jmespath(self, query: str) -> SelectorList[Selector]:
        """A JMESPath query on the JSON body (parsel's), e.g. ``jmespath("rows[].name").getall()``."""
        return self._json_selector.jmespath(query)

    @lazy
    def _json_selector(self) -> Selector:
        from parsel import Selector

        self._require_text()
        return Selector(text=self.text, type="json")

    def xml_nodes(self, tag: str) -> Iterator[Selector]:
        """A selector for each ``tag`` element (any namespace), read as the body is parsed, for
        feed-style XML: ``for node in response.xml_nodes("product"): node.css("sku::text").get()``."""
        self._require_text()
        return xml_nodes(self.body, tag, self.url)

    def csv_rows(
        self, delimiter: str = ",", quotechar: str = '"', headers: Sequence[str] | None = None
    ) -> Iterator[dict[str, str]]:
        """A dict for each CSV row, keyed by ``headers`` (default: the first row); a row with
        another number of fields is skipped with a warning."""
        self._require_text()
        return csv_rows(self.text, delimiter, quotechar, headers, self.url)

    def urljoin(self, url: str) -> str:
        """``url`` made absolute against this response's URL (or ``<base href>``)."""
        base, origin = self._base
        return join_url(base, origin, url)

    @lazy
    def _base(self) -> tuple[str, str]:
        base = self.url
        if _BASE_TAG.search(self.body, 0, 4096) and self.is_text:
            href = self.css("base::attr(href)").get()
            if href:
                base = urljoin(self.url, href.strip())
        scheme, _, rest = base.partition("://")
        netloc = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        return base, f"{scheme}://{netloc}"

    def follow(self, url: str | Selector, callback: Callback | None = None, **kwargs: Any) -> Request:
        """A ``Request`` for a link: an href string or an ``<a>``/``<link>`` selector."""
        href = _href(url)
        return Request(encoded_link(self.urljoin(href), self), callback=callback, **kwargs)

    def _links(self, urls: Iterable[str | Selector] | None, css: str | None, xpath: str | None) -> Iterable[Any]:
        """What ``follow_all`` follows: the hrefs or elements ``css``/``xpath`` select, or ``urls``."""
        if (urls is not None) + (css is not None) + (xpath is not None) != 1:
            raise ValueError("follow_all() takes exactly one of urls, css or xpath")
        if css is not None and not self._is_xml and "::" not in css:
            hrefs: list[str] = compiled_hrefs(css)(self._root)  # the hrefs themselves, no element objects
            return hrefs
        if css is not None:
            return self.css(css) if self._is_xml else compiled_css(css)(self._root)
        if xpath is not None:
            return self.xpath(xpath) if self._is_xml else compiled_xpath(xpath)(self._tree(xpath))
        return urls or ()

    def follow_all(
        self,
        urls: Iterable[str | Selector] | None = None,
        callback: Callback | None = None,
        *,
        css: str | None = None,
        xpath: str | None = None,
        rule: LinkRule | None = None,
        **kwargs: Any,
    ) -> list[Request]:
        """Requests for many links: given ``urls``, or the elements matched by ``css``/``xpath``.

        Elements without an href and non-string hrefs are skipped. With a ``rule``
        (``eclaw.discovery.Rule``) or rule keywords (``allow=``, ``deny=``, ``restrict_css=``,
        ``strategy=``...), only the links the rule follows, each once (docs/rules.md).
        """
        if rule is not None or (kwargs and not RULE_KEYWORDS.isdisjoint(kwargs)):
            if _rule_links is None:
                raise RuntimeError("follow_all() with a rule needs eclaw.discovery: import it")
            return _rule_links(self, urls, callback, css, xpath, rule, kwargs)
        found = self._links(urls, css, xpath)
        if callback is not None and not callable(callback):
            raise TypeError(f"Request callback must be callable, got {callback!r}")
        requests: list[Request] = []
        append = requests.append
        origin = self._base[1] if self._base[0] == self.url else None
        for item in found:
            if type(item) is not str:
                item = item.get("href") if isinstance(item, etree._Element) else _href(item)
                if not item:
                    continue
            href: str = item
            if origin is None or not simple_path(href):
                if href:
                    url = encoded_link(self.urljoin(href.strip()), self)
                    append(Request(url, callback=callback, **kwargs))
            elif kwargs:
                append(Request(origin + href, callback, _safe=True, **kwargs))
            else:  # the common case: a plain link, already safe
                append(plain_request(origin + href, callback))
        return requests


def encoded_link(url: str, page: Response) -> str:
    """A link's absolute ``url`` with the non-ASCII characters of its query percent-encoded in the
    encoding of the ``page`` it is on, as browsers and Scrapy's link extractor send them (the
    path stays UTF-8)."""
    if url.isascii() or "?" not in url:
        return url
    encoding = page.encoding
    if encoding.replace("-", "").lower() in ("utf8", "ascii"):
        return url
    try:
        return safe_url_string(url, encoding)
    except (UnicodeEncodeError, LookupError):  # a character the page's encoding lacks: UTF-8, as before
        return url


def _href(link: Any) -> str:
    if isinstance(link, str):
        return link
    root = getattr(link, "root", None)
    if isinstance(root, str):  # a selector of an attribute or text node
        return root.strip()
    attrib = getattr(link, "attrib", None)
    if attrib is not None:
        return str(attrib.get("href", "")).strip()
    raise TypeError(f"cannot follow {link!r}: expected a URL string or a link element")
