"""Reading sitemap documents: gzip within bounds, XML without entities or network, any namespace.

The sitemap protocol (sitemaps.org) caps a sitemap at 50 MiB uncompressed, so a gzip'd
body is inflated at most that far: a decompression bomb is refused after ~50 MiB of
output, never inflated whole. Documents are parsed incrementally (memory stays flat on
a 50,000-URL sitemap) by lxml with entities left unresolved, no DTD and no network (no
XXE), and read by local names, so any namespace (or none) works. Real sitemaps are
often slightly broken: an unescaped ``&`` in a URL is escaped before parsing; at an XML
error (a truncated end), the entries completed before it are kept (with a warning) and
none after it, so no half-read URL is ever fetched; blank lines before ``<?xml`` are
skipped; a body that is not a sitemap at all is a :class:`SitemapError`. At most
``max_entries`` entries are kept (the caller's ``sitemap_max_urls``); the rest are counted.
"""

from __future__ import annotations

import io
import logging
import re
import zlib
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Literal

from lxml import etree

from eclaw.exceptions import SitemapError

__all__ = ["MAX_SITEMAP_SIZE", "Entry", "Sitemap", "gunzip", "parse_date", "read_sitemap"]

logger = logging.getLogger(__name__)

MAX_SITEMAP_SIZE = 50 * 1024 * 1024  # the protocol's limit for one sitemap, uncompressed
_GZIP = b"\x1f\x8b"
# An "&" that starts no entity or character reference: escaped before parsing, or the
# parser's recovery would drop it and the characters after it from the URL.
_BARE_AMPERSAND = re.compile(rb"&(?!(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#x[0-9A-Fa-f]+);)")
_YEAR_MONTH = re.compile(r"(\d{4})(?:-(\d{2}))?\Z")


@dataclass(frozen=True, slots=True)
class Entry:
    """One ``<url>`` of a urlset or ``<sitemap>`` of an index."""

    loc: str
    lastmod: datetime | None = None
    alternates: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Sitemap:
    """A parsed sitemap: its kind, its entries, and the XML error that ended it early ("" if none);
    ``over``: the entries past ``max_entries`` (not kept), ``first_over`` the first of them."""

    kind: Literal["urlset", "sitemapindex"]
    entries: list[Entry]
    error: str = ""
    over: int = 0
    first_over: Entry | None = None


def gunzip(data: bytes, limit: int = MAX_SITEMAP_SIZE, url: str = "") -> bytes:
    """``data`` inflated, refusing output over ``limit`` bytes (only ``limit + 1`` are ever made)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise SitemapError("bad gzip", f"not valid gzip ({exc})", url) from None
    if len(out) > limit:
        raise SitemapError("too large", f"over {limit} bytes uncompressed (the sitemap protocol's limit)", url)
    if not inflater.eof:
        raise SitemapError("bad gzip", "gzip data ends early", url)
    return out


def read_sitemap(body: bytes, url: str = "", limit: int = MAX_SITEMAP_SIZE, max_entries: int | None = None) -> Sitemap:
    """The sitemap in ``body`` (gzip'd or not), its first ``max_entries`` entries (``None``: all; the
    rest are only counted). Raises :class:`SitemapError` when it is none."""
    data = gunzip(body, limit, url) if body.startswith(_GZIP) else body
    if len(data) > limit:
        raise SitemapError("too large", f"over {limit} bytes (the sitemap protocol's limit)", url)
    if data[:1].isspace():  # blank lines before "<?xml": lxml's recover mode reads past them, as Scrapy does
        data = data.lstrip()
    if b"&" in data and _BARE_AMPERSAND.search(data):
        data = _BARE_AMPERSAND.sub(b"&amp;", data)
    events = etree.iterparse(
        io.BytesIO(data), events=("start", "end"), resolve_entities=False, no_network=True,
        load_dtd=False, remove_comments=True, remove_pis=True, huge_tree=False,
    )  # fmt: skip
    root: Any = None
    kind = ""
    entries: list[Entry] = []
    error = ""
    cap = -1 if max_entries is None else max_entries
    over = 0
    first_over = None
    try:
        for event, element in events:
            if root is None:
                root, kind = element, _local(element.tag)
                if kind not in ("urlset", "sitemapindex"):
                    raise SitemapError("not a sitemap", f"root element <{kind}>, not <urlset> or <sitemapindex>", url)
            elif event == "end" and element.getparent() is root:
                entry = _entry(element)
                if entry is not None and len(entries) != cap:
                    entries.append(entry)
                elif entry is not None:  # past the cap: counted, not kept
                    over += 1
                    first_over = first_over or entry
                element.clear()  # keep memory flat: drop what was read
                while element.getprevious() is not None:
                    del root[0]
    except etree.XMLSyntaxError as exc:
        if root is None:
            raise SitemapError("not XML", str(exc) or "no element", url) from None
        error = str(exc)  # the entries completed before it are kept; none is guessed at
    return Sitemap(kind, entries, error, over, first_over)  # type: ignore[arg-type]


def _local(tag: Any) -> str:
    """An element's name without its namespace."""
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _entry(element: Any) -> Entry | None:
    if _local(element.tag) not in ("url", "sitemap"):
        return None
    loc = ""
    lastmod = None
    alternates = []
    for child in element:
        name = _local(child.tag)
        if name == "loc" and len(child) == 0:  # a child node here is an (unresolved) entity: no URL
            loc = (child.text or "").strip()
        elif name == "lastmod":
            lastmod = parse_date(child.text or "")
        elif name == "link" and child.get("href"):
            alternates.append(child.get("href").strip())
    return Entry(loc, lastmod, tuple(alternates)) if loc else None


def parse_date(text: str | date) -> datetime | None:
    """A W3C datetime (``2024``, ``2024-05``, ``2024-05-17``, ``2024-05-17T10:00:00+02:00``...) or a
    ``date``/``datetime``, as an aware datetime (UTC when no zone is given); ``None`` if unreadable."""
    if isinstance(text, datetime):
        value = text
    elif isinstance(text, date):
        value = datetime(text.year, text.month, text.day)
    else:
        text = text.strip()
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            match = _YEAR_MONTH.match(text)
            if match is None:
                return None
            try:
                value = datetime(int(match.group(1)), int(match.group(2) or 1), 1)
            except ValueError:
                return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
