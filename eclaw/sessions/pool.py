"""A session pool, as Crawlee has one: sessions, each a cookie jar with its own user agent and proxy,
handed out to requests, worn out by use and errors, and retired when a site bans them."""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from eclaw.exceptions import ConfigError
from eclaw.sessions.jars import CookieJars

__all__ = ["Session", "SessionPool"]

logger = logging.getLogger(__name__)


@dataclass
class Session:
    """One client identity. ``id`` is also its cookie jar's key (``meta["cookiejar"]``)."""

    id: str
    user_agent: str = ""
    proxy: str = ""
    usage: int = 0  # responses it got
    errors: float = 0.0  # its error score: +1 per failure, -0.5 per success

    def __repr__(self) -> str:
        return f"<Session {self.id} used {self.usage}x, errors {self.errors:g}>"


class SessionPool:
    """At most ``size`` live sessions, handed out in turn.

    A session is retired (its jar dropped: a fresh session starts without cookies) when it is
    banned (:meth:`retire`), when its error score reaches ``max_errors`` (:meth:`mark_bad`), or
    after ``max_usage`` responses; a new one takes its place when a request needs it.

    Args:
        size: live sessions at most.
        max_usage: responses a session serves before it is retired (0: no limit).
        max_errors: error score at which a session is retired.
        user_agents: each new session takes the next of these (empty: the ``UserAgent``
            middleware's choice).
        proxies: each new session takes the next of these proxy URLs (empty: none of its own).
    """

    def __init__(
        self,
        size: int = 10,
        *,
        max_usage: int = 50,
        max_errors: float = 3.0,
        user_agents: Sequence[str] = (),
        proxies: Sequence[str] = (),
    ) -> None:
        if size < 1 or max_usage < 0 or max_errors <= 0:
            raise ConfigError("SessionPool: size must be at least 1, max_usage not negative, max_errors positive")
        self.size = size
        self.max_usage = max_usage
        self.max_errors = max_errors
        self._agents = list(user_agents)
        self._proxies = list(proxies)
        self._live: dict[str, Session] = {}
        self._turn = 0
        self._made = 0
        self.jars: CookieJars | None = None
        self.counts: Counter[str] = Counter()  # "sessions created", "sessions retired", "sessions banned"

    def __repr__(self) -> str:
        return f"SessionPool(size={self.size}, live={len(self._live)})"

    @property
    def live(self) -> list[Session]:
        return list(self._live.values())

    def get(self, session_id: object) -> Session | None:
        """The live session ``session_id`` (``None`` if it was retired or never was)."""
        return self._live.get(session_id) if isinstance(session_id, str) else None

    def acquire(self, wanted: object = None) -> Session:
        """The session ``wanted`` if it is live, else the next one in turn (a new one while the pool has room)."""
        session = self.get(wanted)
        if session is not None:
            return session
        if len(self._live) < self.size:
            return self._new()
        self._turn = (self._turn + 1) % len(self._live)
        return next(itertools.islice(self._live.values(), self._turn, None))

    def _new(self) -> Session:
        self._made += 1
        n = self._made - 1
        session = Session(
            f"session-{self._made}",
            user_agent=self._agents[n % len(self._agents)] if self._agents else "",
            proxy=self._proxies[n % len(self._proxies)] if self._proxies else "",
        )
        self._live[session.id] = session
        self.counts["sessions created"] += 1
        return session

    def mark_good(self, session: Session) -> None:
        """``session`` got a good response."""
        session.errors = max(0.0, session.errors - 0.5)
        self._used(session)

    def mark_bad(self, session: Session) -> None:
        """``session`` failed (a timeout, a refused connection): retired once its score reaches ``max_errors``."""
        session.errors += 1
        if session.errors >= self.max_errors:
            self._retire(session, f"error score {session.errors:g}")
        else:
            self._used(session)

    def retire(self, session: Session, reason: str = "banned") -> None:
        """``session`` is banned: never used again, its cookies forgotten."""
        if self._retire(session, reason):
            self.counts["sessions banned"] += 1

    def _used(self, session: Session) -> None:
        session.usage += 1
        if self.max_usage and session.usage >= self.max_usage:
            self._retire(session, f"used {session.usage} times")

    def _retire(self, session: Session, reason: str) -> bool:
        if self._live.pop(session.id, None) is None:
            return False  # retired already (its other requests are coming back)
        if self.jars is not None:
            self.jars.drop(session.id)
        self.counts["sessions retired"] += 1
        logger.info("session %s retired: %s", session.id, reason)
        return True

    # -- saved with --state -----------------------------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        return {"made": self._made, "turn": self._turn, "live": [asdict(s) for s in self._live.values()]}

    def restore(self, saved: dict[str, Any]) -> None:
        self._made, self._turn = int(saved.get("made", 0)), int(saved.get("turn", 0))
        self._live = {fields["id"]: Session(**fields) for fields in saved.get("live", [])}
