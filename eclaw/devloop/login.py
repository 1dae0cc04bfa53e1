"""``--login`` for ``eclaw fetch``, ``parse`` and ``shell``: run the spider's own start until its
login is answered, and keep the cookies it got.

The spider's start requests and the callbacks they lead to run as in a crawl (its settings,
middlewares, sessions), nothing is written (no store, no output), and the crawl stops at the
first form it posts (``Request.from_form``, any POST) that is answered without an error status,
redirects followed. A spider whose start posts nothing within ``login_pages`` downloads is a
one-line error: it has no login to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eclaw.contracts import CrawlContext, Fetch
from eclaw.engine import Engine
from eclaw.exceptions import ConfigError
from eclaw.http import Request, Response
from eclaw.middlewares import defaults
from eclaw.settings import Settings
from eclaw.spider import Spider

__all__ = ["login_cookies"]

LOGIN_PAGES = 20  # downloads the spider's start may take to post its login form


class _StopWhenLoggedIn:
    """A middleware that stops the crawl once a POST is answered (2xx or 3xx, redirects followed)."""

    def __init__(self) -> None:
        self.crawl: CrawlContext | None = None
        self.answered: str | None = None

    def __repr__(self) -> str:
        return "StopWhenLoggedIn()"

    async def open(self, crawl: CrawlContext) -> None:
        self.crawl = crawl

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        response = await call_next(request)
        if request.method == "POST" and response.status < 400 and self.answered is None:
            self.answered = response.url
            if self.crawl is not None:
                self.crawl.stop("logged in")
        return response


async def login_cookies(
    spider: type[Spider], args: Mapping[str, Any], overrides: Mapping[str, Any], settings: Settings | None = None
) -> dict[str, Any]:
    """The cookie jars (what :meth:`~eclaw.sessions.jars.CookieJars.checkpoint` returns) after ``spider``'s
    start has posted its login form; a spider that posts none is a :class:`ConfigError`."""
    base = settings if settings is not None else Settings.from_env()
    quiet = {**overrides, "store": "", "state_dir": "", "max_pages": LOGIN_PAGES, "cookies": True}
    effective = base.replace(quiet)
    watch = _StopWhenLoggedIn()
    engine = Engine(base, overrides=quiet, middlewares=[*defaults(effective), watch])
    crawl = engine.prepare(spider, **dict(args))
    stats = await engine.run_crawl(crawl)
    if watch.answered is None or crawl.cookies is None:
        raise ConfigError(
            f"--login: {spider.name}'s start posted no form in {stats.responses_downloaded} responses"
            f" (at most {LOGIN_PAGES} downloads): it has no login to run; use --state or --cookies"
        )
    return crawl.cookies.checkpoint()
