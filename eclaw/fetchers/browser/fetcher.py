"""The browser fetcher: a page as headless Chromium shows it once its scripts ran.

Playwright drives the system's Chromium (no browser download). Each request gets a
new page in a pooled browser context (:mod:`.pool`); the page loads with images, fonts
and media blocked (:mod:`.network`), the request's actions run (:mod:`.actions`), and
the final DOM becomes an ordinary :class:`~eclaw.http.Response`: status and headers of
the page's own document, the URL the page ended on (client-side routing included), the
body as UTF-8 HTML. The JSON answers of the page's XHR/fetch requests are in
``response.meta["xhr"]``. Playwright's errors become :mod:`eclaw.exceptions` here
(:mod:`.errors`), and a page that failed leaves a screenshot (:mod:`.snapshots`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from multidict import CIMultiDict, CIMultiDictProxy

from eclaw.exceptions import ConfigError, DownloadError, IgnoreRequest, ResponseTooLarge
from eclaw.fetchers.browser.actions import Plan
from eclaw.fetchers.browser.errors import translate
from eclaw.fetchers.browser.hops import CredentialHops, Served
from eclaw.fetchers.browser.identity import NavigationRoute, cookies_of, header, navigation_overrides, proxy_option
from eclaw.fetchers.browser.network import Blocker, Network
from eclaw.fetchers.browser.pool import ContextPool, Lease
from eclaw.fetchers.browser.snapshots import Screenshots
from eclaw.fetchers.hops import PROXY_CHOOSER
from eclaw.http import Request, Response
from eclaw.http.urls import host_allowed, redact_url, url_host
from eclaw.security.headers import sensitive_headers
from eclaw.sessions.auth import HostAuth
from eclaw.storage.paths import resolve_path

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright
    from playwright.async_api import Response as PageResponse

    from eclaw.contracts import ChoosesProxy, HopCheck
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["CHROMIUM_FLAGS", "BrowserFetcher", "blink_flags", "find_chromium"]

logger = logging.getLogger(__name__)

# A closed network: no background calls home, no updates, no sync; /dev/shm is small in containers.
CHROMIUM_FLAGS = (
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
)
# Images and web fonts blocked in Blink itself: never requested, where a route would see each one
# pass through Python (twice as slow on an image-heavy page). Chromium keeps the last --blink-settings,
# so they repeat the desktop pointer Playwright sets with its own.
_POINTER = "primaryHoverType=2,availableHoverTypes=2,primaryPointerType=4,availablePointerTypes=4"
_IN_BLINK = {"image": "imagesEnabled=false", "font": "downloadableBinaryFontsEnabled=false"}
BAN_STATUSES = frozenset({403, 429})
LAUNCH_TIMEOUT = 30.0
LEAVE_TIMEOUT = 5.0  # seconds for a page to leave its document before it closes
_HTML = ("text/html", "application/xhtml+xml")
_NOT_KEPT = frozenset({"content-length", "content-encoding", "transfer-encoding", "content-type"})


class BrowserFetcher:
    """Renders requests in headless Chromium (see the module); ``render=True`` routes a request here.

    ``pages_rendered`` and ``contexts_created`` count what it did; ``blocked`` counts the
    requests of pages it did not let through (images, when blocked, are not even asked for).
    """

    def __init__(self) -> None:
        self._playwright: Playwright | None = None
        self._pool: ContextPool | None = None
        self.pages_rendered = 0
        self._check: HopCheck | None = None

    def check_hops(self, check: HopCheck) -> None:
        """Have ``check`` vet each redirect hop eclaw follows itself (:mod:`.hops`; not Chromium's own)."""
        self._check = check

    @property
    def contexts_created(self) -> int:
        return self._pool.created if self._pool is not None else 0

    @property
    def blocked(self) -> int:
        return self._blocker.blocked if self._pool is not None else 0

    async def open(self, spider: Spider, settings: Settings) -> None:
        try:
            from playwright.async_api import async_playwright
        except ImportError:
            raise ConfigError("render=True needs Playwright: pip install 'eclaw[browser]'") from None
        self._settings, self._spider = settings, spider
        self._default = dict(spider.browser)
        Plan.parse(self._default, f"spider {spider.name!r}: browser")
        self._allowed = frozenset(d.lower() for d in spider.allowed_domains)
        self._hops = CredentialHops(
            sensitive_headers(settings.sensitive_headers),
            HostAuth(settings.http_auth, spider.http_auth),
            self._allowed,
            settings.max_redirects,
            settings.max_response_size,
        )
        self._hops.check = self._check
        blocked = set(_items(settings.browser_block))
        self._blink = blink_flags(blocked)
        self._blocker = Blocker(blocked - {"image"}, _items(settings.browser_block_urls))
        folder = settings.browser_screenshots
        self._screenshots = Screenshots(
            resolve_path(folder, spider.name, settings.run_key) if folder else None, settings.browser_screenshots_max
        )
        executable = find_chromium(settings.browser_executable)
        self._playwright = await async_playwright().start()
        self._pool = ContextPool(
            lambda: self._launch(executable),
            self._setup,
            pages=settings.browser_pages,
            context_pages=settings.browser_context_pages,
            contexts=settings.browser_contexts,
        )
        try:
            await self._pool.start()
        except BaseException:
            await self.close()
            raise

    async def _launch(self, executable: str) -> Browser:
        from playwright.async_api import Error

        assert self._playwright is not None
        try:
            browser = await self._playwright.chromium.launch(
                executable_path=executable,
                headless=True,
                args=[*CHROMIUM_FLAGS, *self._blink],
                chromium_sandbox=os.geteuid() != 0,  # Chromium's sandbox refuses root: --no-sandbox there
                timeout=LAUNCH_TIMEOUT * 1000,
            )
        except Error as exc:
            first = exc.message.strip().splitlines()[0] if exc.message.strip() else "no reason given"
            raise ConfigError(f"Chromium ({executable}) would not start: {first}") from None
        try:
            await self._blocker.guard(browser)
        except BaseException:
            await browser.close()
            raise
        return browser

    async def _setup(self, context: BrowserContext) -> None:
        if self._blocker:
            await context.route("**/*", self._blocker)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            logger.info(
                "browser: %d pages rendered in %d contexts, %d requests blocked",
                self.pages_rendered,
                self._pool.created,
                self._blocker.blocked,
            )
            self._pool = None
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None

    async def fetch(self, request: Request) -> Response:
        if self._pool is None:
            raise RuntimeError("browser fetcher is not open")
        meta = request._meta or {}
        declared = meta.get("browser")
        plan = Plan.parse({**self._default, **declared} if declared else self._default)
        proxy, direct = _proxy_policy(meta)
        key = (f"{proxy} direct:{','.join(direct)}" if direct else proxy, plan.context)
        try:
            async with self._pool.page(key, lambda: self._options(request, proxy, direct)) as lease:
                try:
                    response = await self._render(lease, request, plan)
                finally:
                    if self._blocker:
                        await _leave(lease.page)
                lease.banned = response.status in BAN_STATUSES
        except DownloadError:
            raise  # from the page, translated already
        except Exception as exc:  # no page to be had: the browser went away, say
            error = translate(exc, redact_url(request.url), "opening a page", self._settings.browser_timeout)
            if error is None:
                raise
            raise error from exc
        self.pages_rendered += 1
        return response

    def _options(self, request: Request, proxy: str, direct: tuple[str, ...]) -> dict[str, Any]:
        """A new context's options: the identity of the request that opens it."""
        options: dict[str, Any] = {"ignore_https_errors": not self._settings.verify_tls, "service_workers": "block"}
        agent = header(request, "User-Agent") or self._spider.user_agent or self._settings.user_agent
        if agent:
            options["user_agent"] = agent
        if proxy:
            options["proxy"] = proxy_option(proxy, direct)
        return options

    async def _render(self, lease: Lease, request: Request, plan: Plan) -> Response:
        page = lease.page
        own = request._meta.get("download_timeout") if request._meta else None
        timeout = plan.timeout or (float(own) if own is not None else self._settings.browser_timeout)
        page.set_default_timeout(timeout * 1000)
        network = Network(page, self._settings.browser_xhr_bytes)
        doing = "navigation"
        try:
            async with asyncio.timeout(timeout) as budget:
                url = await self._prepare(lease, request)
                main = await page.goto(url, wait_until=plan.wait_until)  # type: ignore[arg-type]
                for step in plan.steps:
                    doing = step.describe()
                    await step.run(page, network)
                doing = "snapshot"
                response = await self._snapshot(page, main, request)
                xhr = await network.settle((budget.when() or 0) - asyncio.get_running_loop().time())
        except Exception as exc:
            error = translate(exc, redact_url(request.url), doing, timeout)
            if error is None:
                raise
            shot = await self._screenshots.take(page, request.url)
            if shot is not None:
                error.args = (f"{error} (screenshot: {shot})",)
            raise error from exc
        finally:
            network.close()
        if self._settings.browser_xhr_bytes:
            request.meta["xhr"] = xhr
        return response

    async def _prepare(self, lease: Lease, request: Request) -> str:
        """Give the page the request's cookies and own headers; the URL to open (the last hop's,
        when eclaw followed the redirects of a request that carries credentials)."""
        cookies = cookies_of(request)
        if cookies:
            await lease.context.add_cookies(cookies)  # type: ignore[arg-type]
        if self._hops.needed(request):
            served = await self._hops.follow(lease.context, request)
            await lease.page.route("**/*", Served(served))
            return served.url
        overrides = navigation_overrides(request)
        if overrides:
            await lease.page.route("**/*", NavigationRoute(overrides))
        return request.url

    async def _snapshot(self, page: Page, main: PageResponse | None, request: Request) -> Response:
        """The response: the DOM now (or, for a document that is no HTML, its own bytes)."""
        url = page.url
        if not host_allowed(url_host(url), self._allowed):
            raise IgnoreRequest("offsite redirect")
        headers: CIMultiDict[str] = CIMultiDict()
        status, served = 200, ""
        if main is not None:
            status = main.status
            for pair in await main.headers_array():
                if pair["name"].lower() not in _NOT_KEPT:
                    headers.add(pair["name"], pair["value"])
            hops = _redirects(main)
            if hops:
                request.meta["redirect_urls"] = hops
            served = main.headers.get("content-type", "")
        if main is not None and served and not served.lower().startswith(_HTML):
            body = await main.body()  # JSON, a PDF, an image: the bytes as served, not the viewer around them
        else:
            body, served = (await page.content()).encode("utf-8"), "text/html; charset=utf-8"
        limit = self._settings.max_response_size
        if len(body) > limit:
            raise ResponseTooLarge(f"{redact_url(url)}: rendered page over max_response_size {limit}")
        headers["Content-Type"] = served
        return Response(url, status=status, headers=CIMultiDictProxy(headers), body=body, request=request)


async def _leave(page: Page) -> None:
    """Take ``page`` off its document before it closes. A request still waiting for its route
    when the page closes is let go to the network by Chromium, the Blocker unasked, and one
    the page starts as it closes is sent unrouted by Playwright: a video, a font or a blocked
    URL the document asked for in its last moment would get through. Leaving the document
    cancels what it asked for, and on ``about:blank`` nothing of it is left to ask. The page
    closes once ``about:blank`` has loaded: closing it midway may never end."""
    with contextlib.suppress(Exception):  # a page that will not go (hung, crashed): it is closed all the same
        async with asyncio.timeout(LEAVE_TIMEOUT + 1):  # Playwright's own timeout is kept by its driver: not
            await page.goto("about:blank", timeout=LEAVE_TIMEOUT * 1000)  # if the driver is wedged


def blink_flags(blocked: set[str]) -> list[str]:
    """Chromium's flags for the resource types of ``blocked`` that Blink itself can refuse to ask for."""
    off = [_IN_BLINK[kind] for kind in sorted(blocked) if kind in _IN_BLINK]
    return [f"--blink-settings={_POINTER},{','.join(off)}"] if off else []


def _proxy_policy(meta: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The proxy of the page's context and the hosts it sends direct: the ``Proxy`` middleware's whole
    policy when it is one proxy (Chromium then chooses for each hop), else ``meta["proxy"]``."""
    chooser: ChoosesProxy | None = meta.get(PROXY_CHOOSER)
    whole = chooser.whole() if chooser is not None else None
    if whole is not None:
        return whole
    return meta.get("proxy") or "", ()


def _redirects(main: PageResponse) -> list[str]:
    """The URLs the page's document was redirected from, first first."""
    hops: list[str] = []
    previous = main.request.redirected_from
    while previous is not None:
        hops.append(previous.url)
        previous = previous.redirected_from
    return hops[::-1]


def _items(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def find_chromium(setting: str) -> str:
    """The Chromium program: ``setting`` (a path or a name on the PATH), else the system's Chromium."""
    if setting:
        found = shutil.which(setting)
        if found is None:
            raise ConfigError(f"setting 'browser_executable': no program {setting!r}")
        return found
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found is not None:
            return found
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    raise ConfigError("render=True needs Chromium: apt-get install chromium (or set browser_executable)")
