"""SOCKS4 and SOCKS5 proxies for the plain fetcher, through aiohttp-socks (and python-socks).

aiohttp speaks to HTTP proxies itself; a SOCKS proxy needs a connector of its own,
so each SOCKS proxy in use gets its own connection pool (made on first use, with
the crawl's limits). ``socks5h://`` resolves host names on the proxy, ``socks5://``
and ``socks4://`` here. Credentials (SOCKS5, ASCII: python-socks sends them so) stay
in the URL the connector is made from, never in a log line or an error (:func:`proxy_name`).
"""

from __future__ import annotations

from collections.abc import Callable

import aiohttp
from yarl import URL

__all__ = ["SOCKS_SCHEMES", "SocksPools", "is_socks", "proxy_name"]

# what each scheme is to aiohttp-socks, and whether host names are resolved by the proxy
SOCKS_SCHEMES: dict[str, tuple[str, bool]] = {
    "socks4": ("socks4", False),
    "socks5": ("socks5", False),
    "socks5h": ("socks5", True),
}


def is_socks(proxy: str) -> bool:
    return proxy.partition("://")[0].lower() in SOCKS_SCHEMES


def proxy_name(proxy: str | None) -> str:
    """The proxy without its credentials, for logs and errors."""
    return str(URL(proxy).with_user(None)) if proxy else "-"


class SocksPools:
    """One ``ClientSession`` per SOCKS proxy, made by ``new_session`` around that proxy's connector.

    aiohttp-socks is imported with the first SOCKS proxy (a crawl without one never pays for it);
    :attr:`errors` are its errors from then on.
    """

    errors: tuple[type[Exception], ...] = ()

    def __init__(
        self,
        new_session: Callable[[aiohttp.BaseConnector], aiohttp.ClientSession],
        *,
        limit: int,
        limit_per_host: int,
        ssl: bool,
    ) -> None:
        self._new_session = new_session
        self._limits = (limit, limit_per_host, ssl)  # as the direct connector's
        self._sessions: dict[str, aiohttp.ClientSession] = {}

    def session(self, proxy: str) -> aiohttp.ClientSession:
        session = self._sessions.get(proxy)
        if session is None:
            from aiohttp_socks import ProxyConnectionError, ProxyConnector, ProxyError, ProxyTimeoutError

            self.errors = (ProxyError, ProxyConnectionError, ProxyTimeoutError)
            scheme, _, rest = proxy.partition("://")
            kind, remote_dns = SOCKS_SCHEMES[scheme.lower()]
            limit, per_host, ssl = self._limits
            connector = ProxyConnector.from_url(
                f"{kind}://{rest}", rdns=remote_dns, limit=limit, limit_per_host=per_host, ssl=ssl
            )
            session = self._sessions[proxy] = self._new_session(connector)
        return session

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()
