"""Request and Response: the values that travel through the engine."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from multidict import CIMultiDict, CIMultiDictProxy
from w3lib.encoding import html_body_declared_encoding, html_to_unicode, http_content_type_encoding
from w3lib.url import safe_url_string

from eclaw.exceptions import InvalidURL

if TYPE_CHECKING:
    from bs4 import BeautifulSoup
    from parsel import Selector, SelectorList

__all__ = ["Request", "Response"]

Callback = Callable[..., Any]


def _absolute(url: str) -> str:
    if not isinstance(url, str):
        raise InvalidURL(f"Request URL must be a string, got {type(url).__name__}")
    url = url.strip()
    scheme, sep, _ = url.partition(":")
    if not sep or not scheme or not scheme.isascii() or not scheme.replace("+", "").isalnum():
        raise InvalidURL(f"malformed URL {url!r}: not absolute (no scheme)")
    scheme = scheme.lower()
    if scheme in ("http", "https"):
        try:
            parts = urlsplit(url)
            host = parts.hostname
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError as exc:
            raise InvalidURL(f"malformed URL {url!r}: {exc}") from None
        if not host:
            raise InvalidURL(f"malformed URL {url!r}: no host")
        return safe_url_string(url)
    return url


@dataclasses.dataclass(slots=True, eq=False)
class Request:
    """A request to fetch ``url`` and hand the response to ``callback``.

    Args:
        url: absolute URL; http(s) URLs are percent-escaped and IDNA-encoded.
            Other schemes are accepted here and dropped by the scheduler.
        callback: spider method (or function) receiving the ``Response``;
            ``None`` means the spider's ``parse``.
        method: HTTP method.
        headers: extra request headers.
        body: request body.
        meta: free-form per-request data, readable as ``response.meta``.
        priority: higher runs first.
        cb_kwargs: extra keyword arguments for the callback.
        dont_filter: skip duplicate and offsite filtering.
        errback: called with the ``RequestFailed`` event when the request
            finally fails; may yield items and requests like a callback.
        depth: link distance from a start request (set by the engine).
    """

    url: str
    callback: Callback | None = None
    method: str = "GET"
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    body: bytes = b""
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    priority: int = 0
    cb_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    dont_filter: bool = False
    errback: Callback | None = None
    depth: int = 0

    def __post_init__(self) -> None:
        self.url = _absolute(self.url)
        self.method = self.method.upper()
        if isinstance(self.body, str):
            self.body = self.body.encode()
        if self.callback is not None and not callable(self.callback):
            raise TypeError(f"Request callback must be callable, got {self.callback!r}")
        if self.errback is not None and not callable(self.errback):
            raise TypeError(f"Request errback must be callable, got {self.errback!r}")

    def replace(self, **changes: Any) -> Request:
        """Return a copy with ``changes`` applied (meta and headers are copied)."""
        changes.setdefault("meta", dict(self.meta))
        changes.setdefault("headers", dict(self.headers))
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        return f"<Request {self.method} {self.url}>"


class Response:
    """A downloaded response.

    ``text`` is decoded with the charset from the Content-Type header, a BOM,
    an HTML ``<meta>`` declaration, then detection, in the order browsers use.
    Selectors (``css``/``xpath``, lxml via parsel) and ``soup`` (BeautifulSoup
    on lxml) are built lazily on first use.
    """

    __slots__ = ("__dict__", "body", "headers", "request", "status", "url")

    def __init__(
        self,
        url: str,
        *,
        status: int = 200,
        headers: Mapping[str, str] | CIMultiDictProxy[str] | None = None,
        body: bytes = b"",
        request: Request | None = None,
    ) -> None:
        self.url = url
        self.status = status
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

    @cached_property
    def encoding(self) -> str:
        """The charset used to decode ``text``."""
        return self._decoded[0]

    @cached_property
    def text(self) -> str:
        """The body decoded to ``str``."""
        return self._decoded[1]

    @cached_property
    def _decoded(self) -> tuple[str, str]:
        content_type = self.headers.get("Content-Type", "")
        declared = http_content_type_encoding(content_type) or html_body_declared_encoding(self.body)
        if declared is None and self.body and not self.body.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
            try:
                return "utf-8", self.body.decode("utf-8")
            except UnicodeDecodeError:
                pass
        return html_to_unicode(content_type, self.body, auto_detect_fun=_detect_encoding)

    @cached_property
    def selector(self) -> Selector:
        """The parsel ``Selector`` over ``text`` (lxml underneath)."""
        from parsel import Selector

        ctype = self.headers.get("Content-Type", "")
        kind = "xml" if "xml" in ctype and "html" not in ctype else "html"
        return Selector(text=self.text, type=kind, base_url=self.url)

    def css(self, query: str) -> SelectorList[Selector]:
        """CSS query (with ``::text`` and ``::attr(name)``), e.g. ``css("h1::text").get()``."""
        return self.selector.css(query)

    def xpath(self, query: str, **namespaces: Any) -> SelectorList[Selector]:
        """XPath query, e.g. ``xpath("//a/@href").getall()``."""
        return self.selector.xpath(query, **namespaces)

    @cached_property
    def soup(self) -> BeautifulSoup:
        """BeautifulSoup tree on the lxml parser, built on first access."""
        from bs4 import BeautifulSoup

        return BeautifulSoup(self.text, "lxml")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.text)

    def urljoin(self, url: str) -> str:
        """``url`` made absolute against this response's URL (or ``<base href>``)."""
        return urljoin(self._base_url, url)

    @cached_property
    def _base_url(self) -> str:
        if b"<base" not in self.body[:4096].lower():
            return self.url
        href = self.css("base::attr(href)").get()
        return urljoin(self.url, href) if href else self.url

    def follow(self, url: str | Selector, callback: Callback | None = None, **kwargs: Any) -> Request:
        """A ``Request`` for a link: an href string or an ``<a>``/``<link>`` selector."""
        href = _href(url)
        return Request(self.urljoin(href), callback=callback, **kwargs)

    def follow_all(
        self,
        urls: Iterable[str | Selector] | None = None,
        callback: Callback | None = None,
        *,
        css: str | None = None,
        xpath: str | None = None,
        **kwargs: Any,
    ) -> list[Request]:
        """Requests for many links: given ``urls``, or the elements matched by ``css``/``xpath``.

        Elements without an href and non-string hrefs are skipped.
        """
        if (urls is not None) + (css is not None) + (xpath is not None) != 1:
            raise ValueError("follow_all() takes exactly one of urls, css or xpath")
        found: Iterable[str | Selector]
        if css is not None:
            found = self.css(css)
        elif xpath is not None:
            found = self.xpath(xpath)
        else:
            found = urls or ()
        requests = []
        for item in found:
            href = _href(item)
            if href:
                requests.append(Request(self.urljoin(href), callback=callback, **kwargs))
        return requests


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


def _detect_encoding(body: bytes) -> str | None:
    from charset_normalizer import from_bytes

    best = from_bytes(body[:65536]).best()
    return best.encoding if best is not None else None
