"""Sessions: each request sent as one of a pool of sessions (cookie jar, user agent, proxy); a session
the site bans is retired and its requests are tried again on fresh ones."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from eclaw.contracts import Fetch
from eclaw.exceptions import Banned, ConnectError, DownloadError, DownloadTimeout, HttpError, RetryRequest
from eclaw.fetchers.hops import merge_cookies
from eclaw.http import Request, Response
from eclaw.http.urls import redact_url
from eclaw.sessions.pool import Session, SessionPool

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext

__all__ = ["Sessions"]

logger = logging.getLogger(__name__)


class Sessions:
    """Send each request as a session of a :class:`~eclaw.sessions.pool.SessionPool` (Crawlee's ``SessionPool``).

    A request is bound to a session: ``meta["session"]`` (its id, also in
    ``response.meta``) and ``meta["cookiejar"]`` (the session's jar), and, when the pool
    was given them, the session's ``User-Agent`` and proxy (``meta["proxy"]``), over any
    the request or another middleware set. A request that names a live session in ``meta["session"]`` keeps it; one that
    names a jar of its own (``meta["cookiejar"]`` without a session) is left alone.

    A response with a status in ``ban_statuses``, or whose text matches ``ban_pattern``, or
    for which ``is_banned(response)`` is true, retires its session (its cookies are
    forgotten) and the request is tried again at once on a fresh session, at most
    ``max_rotations`` times (then it fails: ``http 403``..., or ``banned``). Network
    errors raise a session's error score; good responses lower it.

    For fetchers other than the plain one (a browser), the session's cookies for the URL are
    also in the request's ``Cookie`` header.

    Args:
        size: live sessions at most.
        max_usage: responses a session serves before it is retired (0: no limit).
        max_errors: error score at which a session is retired.
        ban_statuses: statuses that mean "this session is banned".
        ban_pattern: a regular expression searched in the page's text.
        is_banned: your own test of a response (default: the spider's ``is_banned``).
        user_agents: each new session takes the next of these.
        proxies: each new session takes the next of these proxy URLs.
        max_rotations: fresh sessions a request is tried on before it fails.
    """

    def __init__(
        self,
        size: int = 10,
        *,
        max_usage: int = 50,
        max_errors: float = 3.0,
        ban_statuses: Iterable[int] = (401, 403, 429),
        ban_pattern: str | None = None,
        is_banned: Callable[[Response], bool] | None = None,
        user_agents: Sequence[str] = (),
        proxies: Sequence[str] = (),
        max_rotations: int = 10,
    ) -> None:
        self.pool = SessionPool(
            size, max_usage=max_usage, max_errors=max_errors, user_agents=user_agents, proxies=proxies
        )
        self.ban_statuses = frozenset(ban_statuses)
        self.ban_pattern = re.compile(ban_pattern) if ban_pattern else None
        self.is_banned = is_banned
        self.max_rotations = max_rotations

    def __repr__(self) -> str:
        return f"Sessions(size={self.pool.size})"

    async def open(self, crawl: CrawlContext) -> None:
        self.is_banned = self.is_banned or crawl.spider.is_banned
        self.pool.jars = crawl.cookies
        self.pool.counts = crawl.stats.counters

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        meta = request.meta
        if "cookiejar" in meta and "session" not in meta:
            return await call_next(request)  # the spider keeps this request's cookies in a jar of its own
        session = self.pool.acquire(meta.get("session"))
        try:
            response = await call_next(self._bound(request, session))
        except HttpError as exc:
            if exc.status not in self.ban_statuses:
                self.pool.mark_good(session)  # a 404 is not the session's fault
                raise
            retry = self._rotate(request, session, exc.reason, exc)
            if retry is None:
                raise
            raise retry from exc
        except (ConnectError, DownloadTimeout):
            self.pool.mark_bad(session)
            raise
        why = self._ban(response)
        if why is None:
            self.pool.mark_good(session)
            return response
        retry = self._rotate(request, session, why, None)
        if retry is None:
            raise Banned(f"{redact_url(request.url)} looks banned ({why}) on every session tried")
        raise retry

    def _bound(self, request: Request, session: Session) -> Request:
        meta: dict[str, Any] = {**request.meta, "session": session.id, "cookiejar": session.id}
        if session.proxy:
            meta["proxy"] = session.proxy
        headers = dict(request.headers)
        if session.user_agent:
            headers = {k: v for k, v in headers.items() if k.lower() != "user-agent"}
            headers["User-Agent"] = session.user_agent
        jars = self.pool.jars
        cookies = None
        if jars is not None:  # SameSite as the plain fetcher's hops: the page the request was found on
            cookies = jars.header(session.id, request.url, initiator=request.referer, method=request.method)
        if cookies:  # what a fetcher that keeps no jar (a browser) sends; the plain one merges its own
            own = next((name for name in headers if name.lower() == "cookie"), None)
            headers["Cookie"] = merge_cookies(cookies, headers.pop(own) if own else None) or cookies
        return request.replace(meta=meta, headers=headers)

    def _ban(self, response: Response) -> str | None:
        """Why ``response`` is a ban, or ``None``."""
        if response.status in self.ban_statuses:
            return f"http {response.status}"
        if self.ban_pattern is not None and response.is_text and self.ban_pattern.search(response.text):
            return "ban pattern in page"
        if self.is_banned is not None and self.is_banned(response):
            return "is_banned"
        return None

    def _rotate(self, request: Request, session: Session, why: str, error: DownloadError | None) -> RetryRequest | None:
        """Retire ``session``; the request again on a fresh one, or ``None`` when it was tried on enough."""
        self.pool.retire(session, why)
        meta = {key: value for key, value in request.meta.items() if key not in ("session", "cookiejar")}
        rotations = int(meta.get("session_rotations", 0))
        if rotations >= self.max_rotations:
            logger.warning("gave up on %s after %d banned sessions (%s)", redact_url(request.url), rotations + 1, why)
            return None
        meta["session_rotations"] = rotations + 1
        again = request.replace(dont_filter=True, meta=meta)
        error = error or Banned(f"{redact_url(request.url)} looks banned ({why}) on {session.id}")
        return RetryRequest(again, delay=0.0, reason=f"banned: {why}", error=error)

    # -- Resumable: the pool's sessions are saved with --state (their jars with the crawl's cookies)

    def checkpoint(self) -> dict[str, Any]:
        return self.pool.checkpoint()

    def restore(self, saved: dict[str, Any]) -> None:
        self.pool.restore(saved)

    async def flush(self) -> None:
        """Nothing to write ahead."""
