"""What the crawl needs from a fetcher: fetch one request (after the middlewares)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from eclaw.http import Request, Response

if TYPE_CHECKING:
    from eclaw.contracts import HopCheck
    from eclaw.frontier.politeness import Pacing
    from eclaw.sessions.jars import CookieJars
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["Fetcher", "Paced", "UsesCookies", "VetsHops"]


class Fetcher(Protocol):
    """Fetches one request, redirects included; raises :class:`eclaw.exceptions.DownloadError` subclasses
    (and ``IgnoreRequest`` for a redirect off the allowed domains)."""

    async def open(self, spider: Spider, settings: Settings) -> None: ...

    async def fetch(self, request: Request) -> Response: ...

    async def close(self) -> None: ...


@runtime_checkable
class UsesCookies(Protocol):
    """A fetcher that sends and keeps cookies itself, hop by hop: the crawl hands it its
    jars (``crawl.cookies``, saved with ``--state``) before opening it."""

    def use_cookies(self, jars: CookieJars) -> None: ...


@runtime_checkable
class Paced(Protocol):
    """A fetcher that tells the frontier when each request is sent (a host's delay counts from
    then) and asks it whether a connection is worth keeping: the crawl hands it the frontier's
    :class:`~eclaw.frontier.politeness.Pacing` before opening it."""

    def pace(self, pacing: Pacing) -> None: ...


@runtime_checkable
class VetsHops(Protocol):
    """A fetcher that follows redirects itself and lets the crawl vet each hop as it vets a new
    request (robots, offsite, scheme: :class:`~eclaw.contracts.ChecksHops`): the crawl hands it
    ``check`` before opening it; a hop ``check`` refuses ends the request dropped with that reason."""

    def check_hops(self, check: HopCheck) -> None: ...
