"""Built-in middlewares, importable as ``eclaw.middlewares``.

Each is configured through its constructor and placed in a list; list
position is the order (first = outermost)::

    Engine(middlewares=[*defaults(), MyMiddleware()])
"""

from __future__ import annotations

from eclaw.middleware import Middleware
from eclaw.middlewares.default_headers import DefaultHeaders

__all__ = ["DefaultHeaders", "defaults"]


def defaults() -> list[Middleware]:
    """The middlewares a crawl gets when none are configured."""
    return [DefaultHeaders()]
