"""What a request brings into the browser: its proxy, its cookies, its own headers, method and body.

- ``meta["proxy"]`` (the ``Proxy`` middleware sets it) is the proxy of the page's context:
  contexts are keyed by it, credentials go to Playwright apart from the URL. When the middleware's
  policy is one proxy (``proxies=env`` with one for both schemes), the context gets it whole, its
  ``NO_PROXY`` hosts too, so each redirect hop goes through the proxy its own host calls for.
- Cookies: those of the ``Cookie`` header and of ``meta["cookies"]`` (a ``{name: value}``
  dict, or a list of Playwright cookie dicts with ``name``, ``value`` and ``url`` or
  ``domain``/``path``) are added to the context before the page loads, for the request's URL.
- Its other headers, method and body go with the page's own request (the navigation),
  never with the page's subresources; when they hold credentials, its redirects are followed
  hop by hop (:mod:`.hops`); ``User-Agent`` is the context's; ``Proxy-Authorization`` never.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from yarl import URL

from eclaw.exceptions import ConfigError
from eclaw.http import Request

if TYPE_CHECKING:
    from playwright.async_api import Route

__all__ = ["FirstNavigation", "NavigationRoute", "cookies_of", "header", "navigation_overrides", "proxy_option"]

logger = logging.getLogger(__name__)

# Headers the browser sets itself, or that the context carries (cookies, user agent).
# A Proxy-Authorization is the proxy's (the context's proxy option carries its credentials), never the page's.
_BROWSER_OWNED = frozenset(
    {"cookie", "user-agent", "host", "content-length", "connection", "accept-encoding", "proxy-authorization"}
)


def header(request: Request, name: str) -> str:
    """The value of header ``name`` (any case) of ``request``, or ``""``."""
    wanted = name.lower()
    for key, value in (request._headers or {}).items():
        if key.lower() == wanted:
            return value
    return ""


def proxy_option(proxy: str, direct: Sequence[str] = ()) -> dict[str, str]:
    """Playwright's ``proxy`` option for a proxy URL (its credentials apart) and the hosts that go
    direct (``NO_PROXY``: each with its subdomains), so that Chromium chooses for each hop itself."""
    parsed = URL(proxy)
    if not parsed.host or not parsed.scheme:
        raise ConfigError(f"meta['proxy'] {parsed.with_password(None)!s} is not a proxy URL (http://host:port)")
    option = {"server": str(parsed.with_user(None).with_path(""))}
    if direct:  # "<-loopback>": Chromium would send every loopback host direct once one is named
        option["bypass"] = ",".join(["<-loopback>", *direct, *(f"*.{host}" for host in direct if _named(host))])
    if parsed.user is not None:
        option |= {"username": parsed.user, "password": parsed.password or ""}
    return option


def _named(host: str) -> bool:
    """Whether ``host`` is a name (that may have subdomains), not an IP address."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return True
    return False


def cookies_of(request: Request) -> list[dict[str, Any]]:
    """The request's cookies as Playwright wants them: its ``Cookie`` header, then ``meta["cookies"]``."""
    url = request.url
    found: list[dict[str, Any]] = []
    for pair in header(request, "Cookie").split(";"):
        name, sep, value = pair.strip().partition("=")
        if sep and name:
            found.append({"name": name, "value": value, "url": url})
    extra = (request._meta or {}).get("cookies")
    if isinstance(extra, Mapping):
        found += [{"name": str(k), "value": str(v), "url": url} for k, v in extra.items()]
    elif isinstance(extra, list):
        for cookie in extra:
            if not isinstance(cookie, Mapping) or "name" not in cookie or "value" not in cookie:
                raise ConfigError(f"meta['cookies'] of {url}: each cookie needs a name and a value, got {cookie!r}")
            found.append({"url": url, **cookie} if "domain" not in cookie and "url" not in cookie else dict(cookie))
    elif extra is not None:
        raise ConfigError(f"meta['cookies'] of {url} must be a dict or a list of cookies, got {extra!r}")
    return found


def navigation_overrides(request: Request) -> dict[str, Any]:
    """What of the request the page's own request must carry: headers, method, body ({} for none)."""
    overrides: dict[str, Any] = {}
    # lower case, as Playwright gives the browser's own: one entry per header once merged
    headers = {k.lower(): v for k, v in (request._headers or {}).items() if k.lower() not in _BROWSER_OWNED}
    if headers:
        overrides["headers"] = headers
    if request.method != "GET":
        overrides["method"] = request.method
    if request.body:
        overrides["post_data"] = request.body
    return overrides


class NavigationRoute:
    """A page's route handler: gives the page's first navigation the request's ``overrides``
    (one that carries no credentials: those go hop by hop, :mod:`.hops`)."""

    def __init__(self, overrides: dict[str, Any]) -> None:
        self._overrides = overrides
        self._first = FirstNavigation()

    async def __call__(self, route: Route) -> None:
        if not await self._first.claims(route):
            return
        changes = dict(self._overrides)
        if "headers" in changes:
            changes["headers"] = {**route.request.headers, **changes["headers"]}
        await route.fallback(**changes)


class FirstNavigation:
    """The page's own first navigation, for a route handler: any other request (a frame's, a
    resource, a later navigation) goes on to the network untouched."""

    def __init__(self) -> None:
        self._done = False

    async def claims(self, route: Route) -> bool:
        """Whether ``route`` is that navigation (the handler answers it); else it is passed on."""
        request = route.request
        if self._done or not request.is_navigation_request() or request.frame.parent_frame is not None:
            await route.fallback()
            return False
        self._done = True
        return True
