"""Main-content extraction: a page's article as markdown and as plain text, its title and language.

The one place that talks to trafilatura (``pip install 'eclaw[text]'``), imported on first use so
``import eclaw`` stays cheap. Boilerplate (navigation, sidebars, footers, cookie banners) is
dropped; headings, lists, tables and code blocks are kept.

Bounds: the decoded HTML is cut at ``max_chars`` (:data:`MAX_HTML_CHARS`, 2 million characters)
before it is parsed, so a huge page costs a bounded parse (about a second on one core for the
largest page of the Python documentation, 0.7 MB); such a page is marked ``truncated``.

One extraction at a time in the process: trafilatura run from two threads at once corrupts native
memory (a ``double free`` abort, seen here with two markdown outputs extracting in ``to_thread``;
adbar/trafilatura#840 and #925), so :func:`extract_page` holds a process-wide lock around it.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from eclaw.exceptions import ConfigError
from eclaw.text.markdown import Markdown, clean_markdown, clean_title

__all__ = ["MAX_HTML_CHARS", "HtmlPage", "Page", "extract_page", "is_html"]

MAX_HTML_CHARS = 2_000_000
"""The HTML parsed per page, in characters; the rest of a longer page is not read."""

INSTALL = "text extraction needs trafilatura: pip install 'eclaw[text]'"

_HTML_LANG = re.compile(r"<html\b[^>]*?\blang\s*=\s*[\"']?([A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*)", re.IGNORECASE)
_BOILERPLATE = frozenset({"nav", "footer", "aside"})
_BOILERPLATE_ROLES = frozenset({"navigation", "contentinfo", "complementary", "search"})
_DEFINITIONS = {"dl": "div", "dt": "p", "dd": "div"}
_PERMALINK_TEXTS = frozenset({"¶", "#", "§", "🔗"})
_LANGUAGE = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*")
_ONE_AT_A_TIME = threading.Lock()  # trafilatura is not thread-safe (see the module's docstring)


class HtmlPage(Protocol):
    """What extraction reads of a response (an :class:`eclaw.Response` has it all)."""

    url: str
    body: bytes

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def text(self) -> str: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Page:
    """A page's main content.

    Attributes:
        url: the page's URL.
        title: its title: its one ``<h1>``, else its ``og:title``, else its ``<title>``; or ``""``.
        language: its language tag (``en``, ``pt-BR``): ``<html lang>``, else the
            ``Content-Language`` header; ``None`` when the page does not say.
        markdown: the main content as markdown (``""`` when the page has none).
        text: the main content as plain text.
        truncated: the HTML was longer than ``max_chars`` and only its start was read.
    """

    url: str
    title: str
    language: str | None
    markdown: Markdown
    text: str
    truncated: bool = False


def is_html(headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a response is an HTML page (by its Content-Type, else by its first bytes)."""
    media = headers.get("Content-Type", "").partition(";")[0].strip().lower()
    if media:
        return media in ("text/html", "application/xhtml+xml")
    start = body[:512].lstrip().lower()
    return start.startswith((b"<!doctype html", b"<html")) or b"<body" in start


def extract_page(page: HtmlPage, *, max_chars: int = MAX_HTML_CHARS) -> Page:
    """The main content of ``page`` (its decoded text parsed as HTML, the first ``max_chars`` of it).

    Raises ConfigError (one line: ``pip install 'eclaw[text]'``) when trafilatura is missing.
    """
    try:
        import trafilatura
        from trafilatura.utils import load_html
        from trafilatura.xml import xmltotxt
    except ImportError:
        raise ConfigError(INSTALL) from None
    html = page.text
    truncated = len(html) > max_chars
    if truncated:
        html = html[:max_chars]
    with _ONE_AT_A_TIME:
        tree = load_html(html) if html.strip() else None
        document: Any = None
        if tree is None:
            title = ""
        else:
            _simplify(tree)
            title = _title(tree)  # before extraction, which takes the tree apart
            document = trafilatura.bare_extraction(
                tree, url=page.url, output_format="python", include_comments=False, include_tables=True,
                include_formatting=True, favor_recall=True, with_metadata=False,  # its metadata: 3/4 of the time
            )  # fmt: skip
        body = text = ""
        if document is not None and document.body is not None:
            body, text = _nfc(xmltotxt(document.body, True)), _nfc(xmltotxt(document.body, False))
    language = _declared_language(html, page.headers)
    markdown = Markdown(clean_markdown(body), url=page.url, title=title, language=language)
    return Page(url=page.url, title=title, language=language, markdown=markdown, text=text, truncated=truncated)


def _simplify(tree: Any) -> None:
    """Help the extractor: navigation, footers and sidebars go (by tag or ARIA role: its fallbacks
    would take a menu for the content of a page that has none); definition lists (API entries)
    become paragraphs, so the code blocks inside them stay blocks; permalink anchors (``¶``) go;
    a one-line ``<pre>`` stays a block."""
    for element in list(tree.iter()):
        tag = element.tag
        if not isinstance(tag, str):  # a comment, a processing instruction
            continue
        if tag in _BOILERPLATE or element.get("role") in _BOILERPLATE_ROLES:
            element.drop_tree()
        elif tag in _DEFINITIONS:
            element.tag = _DEFINITIONS[tag]
        elif tag == "a" and len(element) == 0 and (element.text or "").strip() in _PERMALINK_TEXTS:
            element.drop_tree()
        elif tag == "pre" and "\n" not in element.text_content().strip():
            _end_with_newline(element)


def _end_with_newline(pre: Any) -> None:
    """A one-line ``<pre>`` is a code block too (the extractor fences only code with a newline)."""
    last = list(pre.iter())[-1]
    if last is pre or (last.tag == "code" and len(last) == 0):
        last.text = (last.text or "") + "\n"
    else:
        last.tail = (last.tail or "") + "\n"


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text).strip()


def _title(tree: Any) -> str:
    """The page's one ``<h1>``, else its ``og:title``, else its ``<title>``; ``""`` without any."""
    candidates = tree.xpath("//h1")
    found = candidates[0].text_content() if len(candidates) == 1 else ""
    if not found.strip():
        meta = tree.xpath("//meta[@property='og:title']/@content")
        found = str(meta[0]) if meta else ""
    if not found.strip():
        titles = tree.xpath("//title")
        found = titles[0].text_content() if titles else ""
    return clean_title(found)[:1000]


def _language(value: str | None) -> str | None:
    """A language tag as written (``en``, ``pt-BR``), or None for none or a malformed one."""
    if not value:
        return None
    value = value.strip().replace("_", "-")
    return value if _LANGUAGE.fullmatch(value) else None


def _declared_language(html: str, headers: Mapping[str, str]) -> str | None:
    """``<html lang>`` in the page's first 16 K characters, else its ``Content-Language`` header (the first)."""
    match = _HTML_LANG.search(html[:16384])
    if match is not None:
        return _language(match.group(1))
    header = headers.get("Content-Language", "")
    return _language(header.split(",")[0])
