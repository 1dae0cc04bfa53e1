"""Built-in middlewares, importable as ``eclaw.middlewares``.

Each is configured through its constructor and placed in a list; list
position is the order (first = outermost)::

    Engine(middlewares=[*defaults(), MyMiddleware()])

``defaults()`` in an engine's list stands for the defaults of each crawl's own
settings (the spider's ``custom_settings`` and ``-s`` included).
"""

from __future__ import annotations

from eclaw.contracts import Fetch, Middleware
from eclaw.http import Request, Response
from eclaw.middlewares.default_headers import DefaultHeaders
from eclaw.middlewares.http_cache import HttpCache
from eclaw.middlewares.ladder import Ladder
from eclaw.middlewares.proxy import Proxy
from eclaw.middlewares.retry import Retry
from eclaw.middlewares.robots import Robots
from eclaw.middlewares.sessions import Sessions
from eclaw.middlewares.throttle import Throttle
from eclaw.middlewares.user_agent import BROWSERS, UserAgent
from eclaw.settings import Settings

__all__ = [
    "BROWSERS",
    "DefaultHeaders",
    "Defaults",
    "HttpCache",
    "Ladder",
    "Proxy",
    "Retry",
    "Robots",
    "Sessions",
    "Throttle",
    "UserAgent",
    "defaults",
]


class Defaults:
    """Holds the place of the default middlewares in an :class:`~eclaw.Engine`'s list:
    each crawl puts there the defaults of its own settings."""

    def __repr__(self) -> str:
        return "defaults()"

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        raise RuntimeError("defaults() is a placeholder for an Engine's list; use defaults(settings) elsewhere")


def defaults(settings: Settings | None = None) -> list[Middleware]:
    """The middlewares a crawl gets when none are configured, outermost first:

    ``Retry`` (unless ``retries=0``), ``Robots`` (if ``obey_robots``), ``Sessions`` (if ``sessions``),
    ``HttpCache`` (if ``http_cache``; revalidating, if ``incremental``), ``Throttle`` (if ``autothrottle``),
    ``UserAgent``, ``Proxy`` (if ``proxies``), ``Ladder`` (if ``ladder``).

    Without ``settings``: ``[Defaults()]``, the place-holder an engine fills per
    crawl from that crawl's settings (``Engine(middlewares=[*defaults(), mine])``).
    """
    if settings is None:
        return [Defaults()]
    chain: list[Middleware] = []
    if settings.retries:
        chain.append(Retry(settings.retries))
    if settings.obey_robots:
        chain.append(Robots())
    if settings.sessions:
        chain.append(Sessions(settings.sessions))  # outside the cache (keyed by session), UserAgent and Proxy
    if settings.http_cache or settings.incremental:
        cache = settings.http_cache or "eclaw-data/{spider}/recrawl"
        chain.append(HttpCache(cache, revalidate=settings.incremental))
    if settings.autothrottle:
        chain.append(Throttle())
    chain.append(UserAgent())
    if settings.proxies:
        chain.append(Proxy.from_setting(settings.proxies))
    if settings.ladder:
        chain.append(Ladder.from_settings(settings))  # innermost: a ban is fetched again with the same headers, proxy
    return chain
