"""HTML parsing and selector queries for ``Response``, on lxml.

Documents are parsed once from bytes with a reused parser, and CSS/XPath
queries are compiled once and cached; results come back as parsel
``Selector``/``SelectorList`` objects, so ``.get()``, ``.getall()``,
``.attrib``, ``.re()`` and nested queries work as Scrapy users expect.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any

from lxml import etree
from parsel import Selector, SelectorList
from parsel.csstranslator import css2xpath

__all__ = ["compiled_css", "compiled_hrefs", "compiled_xpath", "parse_html", "uses_id", "wrap"]

_local = threading.local()  # lxml parsers are not thread-safe: one per thread
_EMPTY = b"<html></html>"


def _parser(ids: bool) -> etree.HTMLParser:
    name = "ids_parser" if ids else "parser"
    parser = getattr(_local, name, None)
    if parser is None:
        # Without a table of ids, libxml2 parses a page ~20 % faster; only XPath's id() needs it.
        parser = etree.HTMLParser(encoding="utf-8", recover=True, huge_tree=True, collect_ids=ids)
        setattr(_local, name, parser)
    return parser


def parse_html(body: bytes, encoding: str, text: str, base_url: str, *, ids: bool = False) -> Any:
    """The lxml root of an HTML document (an empty ``<html>`` for an empty body);
    ``ids``: with the id table XPath's ``id()`` function needs."""
    if encoding.replace("-", "").lower() == "utf8":
        data = body[3:] if body.startswith(b"\xef\xbb\xbf") else body
    else:
        data = text.encode("utf-8")
    parser = _parser(ids)
    root = etree.fromstring(data or _EMPTY, parser=parser, base_url=base_url)
    if root is None:
        root = etree.fromstring(_EMPTY, parser=parser, base_url=base_url)
    return root


_ID_CALL = re.compile(r"(?<![\w.-])id\s*\(")


@lru_cache(maxsize=1024)
def uses_id(xpath: str) -> bool:
    """True if ``xpath`` may call the ``id()`` function (then the document is parsed with its id table)."""
    return _ID_CALL.search(xpath) is not None


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


_new = object.__new__
_NAMESPACES = Selector._default_namespaces


def _selector(root: Any, query: str) -> Selector:
    """``Selector(root=root, _expr=query, type=...)`` without the constructor's checks, which a
    query's own results always pass (a test compares the two, slot by slot)."""
    selector = _new(Selector)
    selector.root = root
    selector.type = "html" if isinstance(root, etree._Element) else "text"
    selector.namespaces = dict(_NAMESPACES)
    selector._expr = query
    selector._huge_tree = True
    selector._text = None
    return selector


def wrap(results: Any, query: str) -> SelectorList[Selector]:
    """parsel selectors for the results of a compiled query."""
    if not isinstance(results, list):  # string(), count() ... give a scalar
        results = [results]
    return SelectorList([_selector(r, query) for r in results])
