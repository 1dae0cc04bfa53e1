"""URL helpers: canonical form, request fingerprints, host policy."""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

from w3lib.url import canonicalize_url

from eclaw.http import Request

__all__ = ["canonical_url", "fingerprint", "host_allowed", "url_host"]

_DEFAULT_PORTS = {"http": ":80", "https": ":443"}


def canonical_url(url: str) -> str:
    """``url`` in canonical form: lower-case scheme and host, default port and
    fragment dropped, query arguments sorted, percent-encoding normalised."""
    canon = canonicalize_url(url)
    scheme, sep, rest = canon.partition("://")
    port = _DEFAULT_PORTS.get(scheme)
    if port:
        host, slash, path = rest.partition("/")
        if host.endswith(port):
            canon = f"{scheme}{sep}{host[: -len(port)]}{slash}{path}"
    return canon


def fingerprint(request: Request) -> bytes:
    """A 20-byte digest of method, canonical URL and body."""
    digest = hashlib.sha1(request.method.encode(), usedforsecurity=False)
    digest.update(b" ")
    digest.update(canonical_url(request.url).encode())
    if request.body:
        digest.update(b" ")
        digest.update(request.body)
    return digest.digest()


def url_host(url: str) -> str:
    """Lower-case host of ``url`` ("" if it has none)."""
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
