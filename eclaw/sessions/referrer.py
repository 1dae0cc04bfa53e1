"""Referrer policies (W3C Referrer Policy): how much of the page a request was found on its
``Referer`` names, if anything.

A request's policy is its ``meta["referrer_policy"]``, else the policy of the page it was found on
(the page's ``<meta name="referrer">``, else its ``Referrer-Policy`` header), else
``no-referrer-when-downgrade``: the default of browsers of old and of Scrapy (its
``DefaultReferrerPolicy``). Each hop of a redirect is sent what the policy allows for that hop.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["DEFAULT_POLICY", "META_KEY", "POLICIES", "known_policy", "page_policy", "referrer"]

META_KEY = "referrer_policy"  # a request's own policy, as in Scrapy
DEFAULT_POLICY = "no-referrer-when-downgrade"
POLICIES = frozenset(
    {
        "no-referrer",
        "no-referrer-when-downgrade",
        "same-origin",
        "origin",
        "strict-origin",
        "origin-when-cross-origin",
        "strict-origin-when-cross-origin",
        "unsafe-url",
    }
)
_ALIASES = {"scrapy-default": DEFAULT_POLICY}  # Scrapy's own name for its default

_META_TAG = re.compile(rb"<meta\s[^>]*?name\s*=\s*[\"']?referrer\b[^>]*>", re.I)
_CONTENT = re.compile(rb"content\s*=\s*[\"']?([^\"'>]*)", re.I)


def known_policy(value: str | None) -> str | None:
    """The policy ``value`` names (the last one it knows of a comma-separated list, as browsers read a
    ``Referrer-Policy`` header), or ``None``."""
    if not value:
        return None
    for token in reversed(value.split(",")):
        name = token.strip().lower()
        name = _ALIASES.get(name, name)
        if name in POLICIES:
            return name
    return None


def page_policy(body: bytes, header: str | None) -> str | None:
    """The policy a page sets for the requests found on it: its ``<meta name="referrer">`` in its
    ``body`` (which a browser applies after the header), else its ``Referrer-Policy`` ``header``;
    ``None`` if neither."""
    if b"eferrer" in body or b"EFERRER" in body:  # cheap: most pages name no policy
        tag = _META_TAG.search(body)
        content = _CONTENT.search(tag.group()) if tag is not None else None
        policy = known_policy(content.group(1).decode("latin-1")) if content is not None else None
        if policy is not None:
            return policy
    return known_policy(header)


def referrer(page: str, url: str, policy: str | None = None) -> str | None:
    """The ``Referer`` a request to ``url`` found on ``page`` sends under ``policy`` (``None``: the
    default); never with credentials or fragment. ``None``: no ``Referer`` at all."""
    name = known_policy(policy) or DEFAULT_POLICY
    if name == "no-referrer":
        return None
    downgrade = page.startswith("https:") and not url.startswith("https:")
    if name == "unsafe-url":
        return _stripped(page)
    if name == "no-referrer-when-downgrade":
        return None if downgrade else _stripped(page)
    same = _origin(page) == _origin(url)
    if name == "same-origin":
        return _stripped(page) if same else None
    if name == "origin":
        return _origin(page) + "/"
    if name == "strict-origin":
        return None if downgrade else _origin(page) + "/"
    if name == "origin-when-cross-origin":
        return _stripped(page) if same else _origin(page) + "/"
    # strict-origin-when-cross-origin
    if same:
        return _stripped(page)
    return None if downgrade else _origin(page) + "/"


def _stripped(url: str) -> str:
    """``url`` without credentials or fragment."""
    if "@" not in url and "#" not in url:
        return url
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, ""))


def _origin(url: str) -> str:
    """scheme://host[:port] of ``url`` (lower-case, default port dropped)."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    port = parts.port
    if ":" in host:
        host = f"[{host}]"
    if port is None or (scheme, port) in (("http", 80), ("https", 443)):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"
