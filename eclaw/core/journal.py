"""The crawl's record of its requests for a saved state (``--state``): which were accepted,
changed (a retry) or finished. Without a state, requests only get their ids."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Protocol

from eclaw.http import Request

__all__ = ["DroppedIds", "Ids", "Journal"]


class Journal(Protocol):
    """What the crawl tells its saved state (:class:`eclaw.core.state.CrawlState` implements it)."""

    def assign(self, requests: Iterable[Request]) -> None:
        """Give new requests their ids (logs, trace; the saved state's rows)."""

    def admitted(self, requests: Sequence[Request], reasons: Sequence[str | None], *, again: bool) -> None:
        """The frontier answered ``requests`` (``None``: queued); ``again``: retries or resumed ones."""

    def accepted(self, request: Request) -> None:
        """``request`` changed (a retry asked for): save it again."""

    def done(self, request: Request) -> None:
        """``request`` reached its end."""

    def marked(self, request: Request, fingerprint: bytes) -> None:
        """A redirect of ``request`` led to a page it made seen (in the dupe filter), before its own end."""

    def marked_by(self, request: Request) -> bytes | None:
        """The page a resumed ``request`` had made seen itself before the crawl stopped, if any: seen, but
        its own to parse."""


class Ids:
    """No saved state: requests get ids (for log lines and the trace), nothing else is kept."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def assign(self, requests: Iterable[Request]) -> None:
        ids = self._ids
        for request in requests:
            if not request._id:
                request._id = next(ids)

    def admitted(self, requests: Sequence[Request], reasons: Sequence[str | None], *, again: bool) -> None:
        return None

    def accepted(self, request: Request) -> None:
        return None

    def done(self, request: Request) -> None:
        return None

    def marked(self, request: Request, fingerprint: bytes) -> None:
        return None

    def marked_by(self, request: Request) -> bytes | None:
        return None


class DroppedIds:
    """Ids for the requests of a ``RequestDropped`` batch (all have one, but those refused as they were yielded)."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def assign(self, drops: Sequence[tuple[Request, str]]) -> None:
        if not all(request._id for request, _ in drops):
            self._journal.assign([request for request, _ in drops])
