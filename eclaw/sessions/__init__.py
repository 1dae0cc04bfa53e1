"""Cookies, credentials and sessions: the crawl's cookie jars (one per ``meta["cookiejar"]``),
basic auth per host, a page's referrer policy, and the session pool (the ``Sessions`` middleware
in :mod:`eclaw.middlewares` hands it out). What each hop of a request carries is chosen in
:mod:`eclaw.fetchers.hops`."""

from eclaw.sessions.auth import HostAuth
from eclaw.sessions.jars import CookieJars
from eclaw.sessions.pool import Session, SessionPool

__all__ = ["CookieJars", "HostAuth", "Session", "SessionPool"]
