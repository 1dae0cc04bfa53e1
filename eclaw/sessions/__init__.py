"""Cookies, credentials and sessions: the crawl's cookie jars (one per ``meta["cookiejar"]``),
basic auth per host, what each hop of a request carries, and the session pool (the
``Sessions`` middleware in :mod:`eclaw.middlewares` hands it out)."""

from eclaw.sessions.auth import HostAuth
from eclaw.sessions.jars import CookieJars
from eclaw.sessions.pool import Session, SessionPool

__all__ = ["CookieJars", "HostAuth", "Session", "SessionPool"]
