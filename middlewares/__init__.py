"""Built-in middlewares, importable as ``eclaw.middlewares``.

Each is configured through its constructor and placed in a list; list
position is the order (first = outermost)::

    Engine(middlewares=[*defaults(settings), MyMiddleware()])
"""

from __future__ import annotations

from eclaw.middleware import Middleware
from eclaw.middlewares.default_headers import DefaultHeaders
from eclaw.middlewares.http_cache import HttpCache
from eclaw.middlewares.proxy import Proxy
from eclaw.middlewares.retry import Retry
from eclaw.middlewares.robots import Robots
from eclaw.middlewares.throttle import Throttle
from eclaw.middlewares.user_agent import BROWSERS, UserAgent
from eclaw.settings import Settings

__all__ = ["BROWSERS", "DefaultHeaders", "HttpCache", "Proxy", "Retry", "Robots", "Throttle", "UserAgent", "defaults"]


def defaults(settings: Settings | None = None) -> list[Middleware]:
    """The middlewares a crawl gets when none are configured, outermost first:

    ``Retry`` (unless ``retries=0``), ``Robots`` (if ``obey_robots``),
    ``HttpCache`` (if ``http_cache``), ``Throttle`` (if ``autothrottle``),
    ``UserAgent``, ``Proxy`` (if ``proxies``).
    """
    settings = settings if settings is not None else Settings()
    chain: list[Middleware] = []
    if settings.retries:
        chain.append(Retry(settings.retries))
    if settings.obey_robots:
        chain.append(Robots())
    if settings.http_cache:
        chain.append(HttpCache(settings.http_cache))
    if settings.autothrottle:
        chain.append(Throttle())
    chain.append(UserAgent())
    if settings.proxies:
        chain.append(Proxy.from_setting(settings.proxies))
    return chain
