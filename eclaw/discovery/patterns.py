"""URL patterns for link rules and sitemaps: regular expressions, and globs marked with :func:`glob`.

A plain string is a regular expression searched anywhere in the absolute URL (as in
Scrapy: ``r"/news/\\d+"``). A glob is written ``glob("...")`` (as in Crawlee's ``globs``)
and must match the whole URL, or, when it starts with ``/``, the whole path and query:

- ``*`` matches any run of characters but ``/``; ``**`` matches anything, ``/`` included;
- every other character is itself: ``?``, ``.``, ``[`` and ``+`` are literal, since URLs
  are full of them (``glob("/search?q=*")`` means what it says).

All the patterns of one list are compiled into one regular expression, once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from eclaw.exceptions import ConfigError

__all__ = ["DEFAULT_DENY_EXTENSIONS", "Glob", "UrlPattern", "compile_patterns", "extensions", "glob", "patterns"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Glob:
    """A glob over URLs (made by :func:`glob`)."""

    pattern: str

    def regex(self) -> str:
        """The regular expression that matches what the glob matches (anchored)."""
        parts = re.split(r"(\*\*|\*)", self.pattern)
        body = "".join(".*" if part == "**" else "[^/]*" if part == "*" else re.escape(part) for part in parts)
        if self.pattern.startswith("/"):
            return rf"\A[a-z][a-z0-9+.\-]*://[^/?#]*{body}\Z"  # the path (and query) of any origin
        return rf"\A{body}\Z"


def glob(pattern: str) -> Glob:
    """A URL glob: ``glob("/news/*/*.html")`` (path and query) or ``glob("https://*.example.com/**")``.

    ``*`` stops at ``/``, ``**`` does not; every other character is literal.
    """
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"glob() takes a non-empty string, got {pattern!r}")
    return Glob(pattern)


UrlPattern = str | re.Pattern[str] | Glob


def patterns(value: UrlPattern | Sequence[UrlPattern] | None, what: str) -> tuple[UrlPattern, ...]:
    """``value`` as a tuple of patterns (one pattern or a list of them); a bad one is a :class:`ConfigError`."""
    if value is None:
        return ()
    items = (value,) if isinstance(value, str | re.Pattern | Glob) or not isinstance(value, Iterable) else tuple(value)
    for item in items:
        if not isinstance(item, str | re.Pattern | Glob):
            raise ConfigError(f"{what}: {item!r} is not a pattern (a regex string, re.compile(...) or glob(...))")
    return items


def compile_patterns(items: Iterable[UrlPattern], what: str) -> re.Pattern[str] | None:
    """One regular expression matching a URL when any of ``items`` does (``None`` for no patterns)."""
    sources = []
    for item in items:
        if isinstance(item, Glob):
            sources.append(item.regex())
        elif isinstance(item, re.Pattern):
            sources.append(f"(?{_flags(item)}:{item.pattern})" if _flags(item) else item.pattern)
        else:
            sources.append(item)
        try:
            re.compile(sources[-1])
        except re.error as exc:
            raise ConfigError(f"{what}: bad regular expression {_shown(item)}: {exc}") from None
    if not sources:
        return None
    return re.compile("|".join(f"(?:{source})" for source in sources))


def _flags(pattern: re.Pattern[str]) -> str:
    """The inline form of a compiled pattern's own flags (kept when it joins the others)."""
    return "".join(
        letter for flag, letter in ((re.I, "i"), (re.M, "m"), (re.S, "s"), (re.X, "x")) if pattern.flags & flag
    )


def _shown(item: UrlPattern) -> str:
    if isinstance(item, Glob):
        return f"glob({item.pattern!r})"
    return repr(item.pattern if isinstance(item, re.Pattern) else item)


# Links to files that are not pages: no request is made for them by default (Scrapy's
# IGNORED_EXTENSIONS, plus fonts, scripts, newer image and archive formats).
DEFAULT_DENY_EXTENSIONS = frozenset(
    {
        # archives and packages
        "7z", "7zip", "bz2", "gz", "rar", "tar", "tgz", "xz", "zip", "zst",
        "apk", "bin", "deb", "dmg", "exe", "iso", "jar", "msi", "rpm",
        # images
        "ai", "avif", "bmp", "cdr", "drw", "dxf", "eps", "gif", "heic", "ico", "jpeg", "jpg", "mng",
        "pct", "png", "ps", "psd", "psp", "pst", "svg", "tif", "tiff", "webp",
        # audio and video
        "3gp", "aac", "aiff", "asf", "asx", "au", "avi", "flac", "flv", "m4a", "m4v", "mid", "mkv", "mov",
        "mp3", "mp4", "mpeg", "mpg", "ogg", "qt", "ra", "rm", "swf", "wav", "webm", "wma", "wmv",
        # documents and office suites
        "doc", "docx", "epub", "odg", "odp", "ods", "odt", "pdf", "pps", "ppt", "pptx", "rtf", "xls", "xlsx",
        # page resources and feeds
        "css", "eot", "js", "otf", "rss", "ttf", "woff", "woff2",
    }
)  # fmt: skip


def extensions(value: Iterable[str] | None, what: str) -> frozenset[str]:
    """File extensions, lower-case, without their dot (``None``: the defaults)."""
    if value is None:
        return DEFAULT_DENY_EXTENSIONS
    if isinstance(value, str):
        raise ConfigError(f"{what} must be a list of extensions, got the string {value!r}")
    return frozenset(str(ext).lower().lstrip(".") for ext in value)
