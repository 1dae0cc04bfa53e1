"""DefaultHeaders: add headers a request does not set itself."""

from __future__ import annotations

from collections.abc import Mapping

from eclaw.contracts import Fetch
from eclaw.http import Request, Response

__all__ = ["DefaultHeaders"]

BROWSER_LIKE = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Accept-Language": "en",
}


class DefaultHeaders:
    """Set ``headers`` on every request that does not already carry them
    (names compared case-insensitively).

    Args:
        headers: defaults; ``Accept`` and ``Accept-Language`` like a browser if omitted.
    """

    def __init__(self, headers: Mapping[str, str] | None = None) -> None:
        self.headers = dict(BROWSER_LIKE if headers is None else headers)

    def __repr__(self) -> str:
        return f"DefaultHeaders({self.headers!r})"

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        present = {name.lower() for name in request.headers}
        missing = {k: v for k, v in self.headers.items() if k.lower() not in present}
        if missing:
            request = request.replace(headers={**missing, **request.headers})
        return await call_next(request)
