"""Each hop of a redirect vetted as a new request would be: the checks of the parts that make them
(:class:`~eclaw.contracts.ChecksHops`: the frontier's scheme, URL length and offsite checks, the
``Robots`` middleware's robots.txt), as the one :data:`~eclaw.contracts.HopCheck` a fetcher calls."""

from __future__ import annotations

from collections.abc import Iterable

from eclaw.contracts import ChecksHops, HopCheck
from eclaw.http import Request

__all__ = ["hop_check"]


def hop_check(parts: Iterable[object]) -> HopCheck | None:
    """The checks of those of ``parts`` that vet hops, in order (the first to refuse ends it), or
    ``None`` when none does."""
    checks = [part.check_hop for part in parts if isinstance(part, ChecksHops)]  # declared by the part
    if len(checks) <= 1:
        return checks[0] if checks else None

    async def check(request: Request, url: str) -> None:
        for one in checks:
            await one(request, url)

    return check
