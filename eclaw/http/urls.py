"""URL helpers: escaping, joining, canonical form, request fingerprints, host policy.

Every function has a fast path for the plain ASCII URLs that make up almost
all links, and falls back to w3lib / urllib for everything else; the two
paths give identical results (tests compare them).
"""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

from w3lib.url import canonicalize_url, safe_url_string

from eclaw.exceptions import InvalidURL
from eclaw.security.redact import redact_url  # the rule lives with the redaction boundary

__all__ = [
    "absolute_url",
    "canonical_url",
    "host_allowed",
    "join_url",
    "redact_url",
    "safe_url",
    "url_host",
]

_DEFAULT_PORTS = {"http": ":80", "https": ":443"}

# Absolute http(s) URLs made only of characters that need no escaping.
_PLAIN = re.compile(
    r"(https?)://([a-z0-9.\-]+)(:[0-9]{1,5})?((?:/[a-z0-9\-._~/:;,+!$'()*@]*)?(?:\?[a-z0-9\-._~/?&=:;,+!$()*@]+)?)"
    r"(#[a-z0-9\-._~/?&=:;,+!$'()*@]+)?\Z",
    re.I,
)
# ... and, for canonical form, with nothing to normalise in path or query.
_CANON = re.compile(
    r"(https?)://([a-z0-9.\-]+)(:[0-9]{1,5})?(/[a-z0-9\-._~/]*)?(?:\?([a-z0-9\-._~=&]*))?(?:#.*)?\Z", re.I | re.S
)
_HOST = re.compile(r"[a-z][a-z0-9+.\-]*://([a-z0-9.\-]*)(?::[0-9]*)?(?:[/?#]|\Z)", re.I)


def safe_url(url: str) -> str:
    """``url`` percent-escaped, with an IDNA host (like ``w3lib.url.safe_url_string``)."""
    return _simple_url(url) or _plain_url(url) or safe_url_string(url)


def _plain_url(url: str) -> str | None:
    """``url`` already safe but for scheme/host case, or ``None`` if it needs real escaping."""
    match = _PLAIN.match(url)
    if match is None or (match.group(3) and int(match.group(3)[1:]) > 65535):
        return None
    scheme, host, port, rest, fragment = match.groups()
    return f"{scheme.lower()}://{host.lower()}{port or ''}{rest or ''}{fragment or ''}"


class _Memo:
    """A bounded memo of a pure str -> str function: two generations of
    ``size`` entries; the older one is dropped when the newer one fills."""

    __slots__ = ("_new", "_old", "_size")

    def __init__(self, size: int) -> None:
        self._size = size
        self._new: dict[str, str] = {}
        self._old: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        value = self._new.get(key)
        if value is None:
            value = self._old.get(key)
            if value is not None:
                self.put(key, value)
        return value

    def put(self, key: str, value: str) -> None:
        if len(self._new) >= self._size:
            self._old, self._new = self._new, {}
        self._new[key] = value


_absolute_memo = _Memo(8192)  # links repeat across pages (navigation, related items)


def absolute_url(url: str) -> str:
    """Validate an absolute URL; http(s) URLs come back escaped by :func:`safe_url`.

    Raises:
        InvalidURL: not a string, no scheme, no host, or a bad port.
    """
    if isinstance(url, str):
        known = _absolute_memo.get(url)
        if known is not None:
            return known
    checked = _absolute_url(url)
    _absolute_memo.put(url, checked)
    return checked


def _absolute_url(url: str) -> str:
    if not isinstance(url, str):
        raise InvalidURL(f"Request URL must be a string, got {type(url).__name__}")
    fast = _simple_url(url) or _plain_url(url)
    if fast is not None:
        return fast
    url = url.strip()
    scheme, sep, _ = url.partition(":")
    if not sep or not scheme or not scheme.isascii() or not scheme.replace("+", "").isalnum():
        raise InvalidURL(f"malformed URL {url!r}: not absolute (no scheme)")
    if scheme.lower() not in ("http", "https"):
        return url  # mailto:, data:, ... are valid requests that the frontier drops
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise InvalidURL(f"malformed URL {url!r}: {exc}") from None
    if not host:
        raise InvalidURL(f"malformed URL {url!r}: no host")
    return safe_url_string(url)


_SIMPLE = re.compile(
    r"(https?://[A-Za-z0-9.\-]+(?::([0-9]{1,5}))?)(?:/[A-Za-z0-9\-._~/=&:]*)?(?:\?[A-Za-z0-9\-._~/?=&:]+)?"
)


def _simple_url(url: str) -> str | None:
    """The commonest case, cheaply: an http(s) URL of unreserved characters only."""
    match = _SIMPLE.fullmatch(url)
    if match is None:
        return None
    prefix, port = match.groups()
    if port and int(port) > 65535:
        return None
    return url if prefix.islower() else prefix.lower() + url[len(prefix) :]


_SIMPLE_PATH = re.compile(r"/(?!/)[A-Za-z0-9\-._~/=&:]*(?:\?[A-Za-z0-9\-._~/?=&:]+)?(?:#[A-Za-z0-9\-._~/?=&:]+)?")


def simple_path(href: str) -> bool:
    """True if ``href`` is an absolute path (a fragment allowed) that needs no escaping
    or resolving, so ``origin + href`` is already the safe absolute URL."""
    return _SIMPLE_PATH.fullmatch(href) is not None and "/." not in href


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def join_url(base: str, origin: str, href: str) -> str:
    """``href`` resolved against ``base`` (whose scheme://host[:port] is ``origin``)."""
    if "/." not in href and "\\" not in href:
        if href.startswith("/") and not href.startswith("//"):
            return origin + href
        if href.startswith(("http://", "https://")):
            return href
        if _SCHEME.match(href) and not href.startswith(("http:", "https:")):
            return href  # mailto:, javascript:, tel: ... are absolute: nothing to join
    return urljoin(base, href)


def canonical_url(url: str) -> str:
    """``url`` in canonical form: lower-case scheme and host, default port and
    fragment dropped, query arguments sorted, percent-encoding normalised."""
    match = _CANON.match(url)
    if match is None or "/." in (match.group(4) or ""):
        return _fast_canonical(canonicalize_url(url))
    return _fast_canonical(url, match)


def _fast_canonical(url: str, match: re.Match[str] | None = None) -> str:
    match = match or _CANON.match(url)
    if match is None:  # w3lib's output that is still not plain: keep it, minus the default port
        scheme, sep, rest = url.partition("://")
        port = _DEFAULT_PORTS.get(scheme)
        if port:
            host, slash, path = rest.partition("/")
            if host.endswith(port):
                return f"{scheme}{sep}{host[: -len(port)]}{slash}{path}"
        return url
    scheme, host, port, path, query = match.groups()
    scheme = scheme.lower()
    if port == _DEFAULT_PORTS[scheme]:
        port = ""
    if query:
        pairs = sorted(tuple(arg.partition("=")[::2]) for arg in query.split("&") if arg)
        query = "&".join(f"{key}={value}" for key, value in pairs)
    return f"{scheme}://{host.lower()}{port or ''}{path or '/'}{'?' + query if query else ''}"


def url_host(url: str) -> str:
    """Lower-case host of ``url`` ("" if it has none)."""
    match = _HOST.match(url)
    if match is not None:
        return match.group(1).lower()
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def host_allowed(host: str, allowed_domains: frozenset[str]) -> bool:
    """True if ``host`` is one of ``allowed_domains`` or a subdomain of one.

    An empty ``allowed_domains`` allows every host.
    """
    if not allowed_domains or host in allowed_domains:
        return True
    return any(host.endswith("." + domain) for domain in allowed_domains)
