"""What a page asks of the network: blocked resources, requests in flight, JSON the page fetched."""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.async_api import Browser, CDPSession, Page, Route
    from playwright.async_api import Request as PageRequest
    from playwright.async_api import Response as PageResponse

__all__ = ["Blocker", "Network"]

logger = logging.getLogger(__name__)

_CAPTURED = frozenset({"xhr", "fetch"})


class Blocker:
    """A route handler for every context: aborts the requests of ``types`` (Playwright's resource
    types: image, font, media...) and those whose URL matches one of ``patterns`` (globs, ``*``
    matching anything). The page's own navigation is never blocked.

    A route sees only what a page asks while it is open: a ``keepalive`` fetch or a beacon sent as
    the page is left outlives it, unrouted. So the URL patterns are also enforced below the pages,
    by the browser itself (:meth:`guard`): Chromium pauses every request whose URL matches, from any
    page, worker or unload handler, and the blocker fails it."""

    def __init__(self, types: Iterable[str], patterns: Iterable[str]) -> None:
        self.types = frozenset(types)
        self._patterns = list(patterns)
        globs = [fnmatch.translate(pattern) for pattern in self._patterns]
        self._urls = re.compile("|".join(globs)) if globs else None
        self._failing: set[asyncio.Task[None]] = set()
        self.blocked = 0

    async def guard(self, browser: Browser) -> None:
        """Have ``browser`` hold back every request whose URL matches a pattern (a session of the
        browser's own, Chromium's Fetch domain): documents go on to the page's route, which lets the
        page's own navigation through and refuses a frame's; everything else fails here."""
        if not self._patterns:
            return
        session = await browser.new_browser_cdp_session()
        session.on("Fetch.requestPaused", lambda event: self._paused(session, event))
        await session.send("Fetch.enable", {"patterns": [{"urlPattern": pattern} for pattern in self._patterns]})

    def _paused(self, session: CDPSession, event: dict[str, Any]) -> None:
        params: dict[str, Any] = {"requestId": event["requestId"]}
        if event.get("resourceType") == "Document":
            method = "Fetch.continueRequest"
        else:
            method, params["errorReason"] = "Fetch.failRequest", "BlockedByClient"
            self.blocked += 1
        task = asyncio.ensure_future(_answer(session, method, params))
        self._failing.add(task)
        task.add_done_callback(self._failing.discard)

    def __bool__(self) -> bool:
        return bool(self.types) or self._urls is not None

    def blocks(self, resource_type: str, url: str) -> bool:
        return resource_type in self.types or (self._urls is not None and self._urls.match(url) is not None)

    async def __call__(self, route: Route) -> None:
        request = route.request
        if self.blocks(request.resource_type, request.url) and not _is_main_navigation(request):
            self.blocked += 1
            await route.abort("blockedbyclient")
        else:
            await route.fallback()


class Network:
    """Watches one page: how many of its requests are in flight (so a step can wait for the page
    to settle) and, with a ``budget`` of bytes, the JSON answers of its XHR/fetch requests."""

    def __init__(self, page: Page, budget: int) -> None:
        self.in_flight = 0
        self.xhr: list[dict[str, Any]] = []
        self._budget = budget
        self._reads: dict[asyncio.Task[None], dict[str, Any]] = {}  # a body being read -> its entry
        self._changed = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        page.on("request", self._started)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._ended)
        if budget:
            page.on("response", self._answered)

    def _started(self, request: PageRequest) -> None:
        self.in_flight += 1
        self._touch()

    def _ended(self, request: PageRequest) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        self._touch()

    def _touch(self) -> None:
        self._last = self._loop.time()
        self._changed.set()

    async def quiet(self, idle: float) -> None:
        """Return once no request has been in flight for ``idle`` seconds, counted from now at the
        earliest: what a click or a scroll just did may take a moment to start a request."""
        start = self._loop.time()
        while True:
            self._changed.clear()
            if self.in_flight:
                await self._changed.wait()
                continue
            left = max(self._last, start) + idle - self._loop.time()
            if left <= 0:
                return
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                return  # nothing started or ended meanwhile

    def _answered(self, response: PageResponse) -> None:
        if response.request.resource_type not in _CAPTURED or "json" not in response.headers.get("content-type", ""):
            return
        entry: dict[str, Any] = {"url": response.url, "method": response.request.method, "status": response.status}
        entry["json"] = None
        self.xhr.append(entry)
        self._reads[asyncio.ensure_future(self._read(response, entry))] = entry

    async def _read(self, response: PageResponse, entry: dict[str, Any]) -> None:
        try:
            body = await response.body()
        except Exception as exc:  # the page went, or the body never came: the entry stays without it
            logger.debug("no body for %s: %s", response.url, exc)
            entry["skipped"] = "no body"
            return
        if len(body) > self._budget:
            entry["skipped"] = f"{len(body)} bytes over what is left of browser_xhr_bytes ({self._budget})"
            return
        self._budget -= len(body)
        try:
            entry["json"] = json.loads(body)
        except ValueError:
            entry["skipped"] = "not JSON"

    async def settle(self, seconds: float) -> list[dict[str, Any]]:
        """The captured answers, once their bodies are read (at most ``seconds``; the rest stay without)."""
        pending = [task for task in self._reads if not task.done()]
        if pending:
            _, late = await asyncio.wait(pending, timeout=max(0.0, seconds))
            for task in late:
                task.cancel()
                self._reads[task]["skipped"] = "not read in time"
        return self.xhr

    def close(self) -> None:
        """The page is going: stop reading bodies."""
        for task in self._reads:
            task.cancel()


async def _answer(session: CDPSession, method: str, params: dict[str, Any]) -> None:
    with contextlib.suppress(Exception):  # the request or the browser went meanwhile: nothing left to hold
        await session.send(method, params)


def _is_main_navigation(request: PageRequest) -> bool:
    return request.is_navigation_request() and request.frame.parent_frame is None
