"""HTML parsing and selector queries for ``Response``, on lxml.

Documents are parsed once from bytes with a reused parser, and CSS/XPath
queries are compiled once and cached; results come back as parsel
``Selector``/``SelectorList`` objects, so ``.get()``, ``.getall()``,
``.attrib``, ``.re()`` and nested queries work as Scrapy users expect.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

from lxml import etree
from parsel import Selector, SelectorList
from parsel.csstranslator import css2xpath

__all__ = ["compiled_css", "compiled_hrefs", "compiled_xpath", "parse_html", "wrap"]

_local = threading.local()  # lxml parsers are not thread-safe: one per thread
_EMPTY = b"<html></html>"


def _parser() -> etree.HTMLParser:
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = etree.HTMLParser(encoding="utf-8", recover=True, huge_tree=True)
    return parser


def parse_html(body: bytes, encoding: str, text: str, base_url: str) -> Any:
    """The lxml root of an HTML document (an empty ``<html>`` for an empty body)."""
    if encoding.replace("-", "").lower() == "utf8":
        data = body[3:] if body.startswith(b"\xef\xbb\xbf") else body
    else:
        data = text.encode("utf-8")
    root = etree.fromstring(data or _EMPTY, parser=_parser(), base_url=base_url)
    if root is None:
        root = etree.fromstring(_EMPTY, parser=_parser(), base_url=base_url)
    return root


@lru_cache(maxsize=1024)
def compiled_css(query: str) -> etree.XPath:
    """The compiled XPath for a CSS query (``::text`` and ``::attr(x)`` supported)."""
    return etree.XPath(css2xpath(query), smart_strings=False)


@lru_cache(maxsize=256)
def compiled_hrefs(query: str) -> etree.XPath:
    """The XPath for the ``href`` values of the elements a CSS query selects (as plain strings)."""
    return etree.XPath(f"({css2xpath(query)})/@href", smart_strings=False)


@lru_cache(maxsize=1024)
def compiled_xpath(query: str) -> etree.XPath:
    return etree.XPath(query, smart_strings=False)


def wrap(results: Any, query: str) -> SelectorList[Selector]:
    """parsel selectors for the results of a compiled query."""
    if not isinstance(results, list):  # string(), count() ... give a scalar
        results = [results]
    return SelectorList(
        Selector(root=r, _expr=query, type="html" if isinstance(r, etree._Element) else "text") for r in results
    )
