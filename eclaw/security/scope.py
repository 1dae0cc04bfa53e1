"""What one hop of a request may carry: the one rule every fetcher applies on every hop.

A request's own credentials (``Authorization``, ``Proxy-Authorization``, ``Cookie`` and every
header of :func:`~eclaw.security.headers.sensitive_headers`) go to its own origin only (scheme,
host and port, default ports counted), and never over http once its chain of hops was https.
A ``Proxy-Authorization`` goes to a proxy only, never to an origin, and only to the proxy it was
meant for. As requests' ``should_strip_auth``/``rebuild_proxies`` and httpx's ``_same_origin``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from eclaw.security.redact import redact_url

__all__ = ["Origin", "downgraded", "origin", "proxy_authorization", "scoped", "why_not_carried"]

logger = logging.getLogger(__name__)

Origin = tuple[str, str, int]  # scheme, host, port
DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> Origin:
    """The origin of ``url``: lower-case scheme and host, its port (the scheme's default if none)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # a port out of range: no origin anything is bound to
        port = -1
    return scheme, (parts.hostname or "").lower(), port or DEFAULT_PORTS.get(scheme, 0)


def downgraded(chain: Sequence[str], url: str) -> bool:
    """Whether ``url`` is plain http after an https hop of ``chain`` (the URLs before it)."""
    return url[:5].lower() == "http:" and any(hop[:6].lower() == "https:" for hop in chain)


def why_not_carried(first: str, chain: Sequence[str], url: str) -> str | None:
    """Why the credentials of a request for ``first`` may not go to ``url``, a hop after ``chain``
    (the hops before it, ``first`` first; empty for the first hop); ``None`` when they may."""
    if downgraded(chain, url):
        return "https to http"
    if chain and origin(url) != origin(first):
        return "another origin"
    return None


def scoped(headers: Mapping[str, str], sensitive: frozenset[str], why: str | None, url: str) -> Mapping[str, str]:
    """``headers`` for ``url`` without the ``sensitive`` ones (lower-case names) when ``why`` says
    they may not go there (from :func:`why_not_carried`); ``Proxy-Authorization`` always goes."""
    dropped = [name for name in headers if name.lower() in sensitive] if why else []
    if not why and not any(name.lower() == "proxy-authorization" for name in headers):
        return headers
    if dropped:
        logger.debug("not sent to %s: %s (%s)", redact_url(url), ", ".join(dropped), why)
    drop = sensitive if why else frozenset({"proxy-authorization"})  # an origin never gets the proxy's
    return {name: value for name, value in headers.items() if name.lower() not in drop}


def proxy_authorization(headers: Mapping[str, str] | None, meant_for: str | None, proxy: str | None) -> str | None:
    """The ``Proxy-Authorization`` a request carries in ``headers`` when its hop goes through ``proxy``
    and that is the proxy it was meant for (``meant_for``: the request's ``meta["proxy"]``); else
    ``None``: one proxy's credentials never go to another, nor to an origin."""
    value = next((v for name, v in (headers or {}).items() if name.lower() == "proxy-authorization"), None)
    if value is None or proxy is None or meant_for is None:
        return None
    if _proxy_origin(proxy) != _proxy_origin(meant_for):
        logger.debug("Proxy-Authorization not sent to proxy %s: it is for another proxy", _proxy_origin(proxy)[1])
        return None
    return value


def _proxy_origin(proxy: str) -> Origin:
    return origin(proxy if "://" in proxy else f"http://{proxy}")
