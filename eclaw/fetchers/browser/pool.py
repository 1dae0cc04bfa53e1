"""The browser and its contexts: a bounded number of pages open at once, contexts recycled.

A browser context is one identity: its cookie jar, its storage, its proxy, its user agent.
Pages are opened in the context of their key (proxy, context name), at most ``pages`` at
once. A context that has served ``context_pages`` pages is retired (its renderer memory
goes with it) and its cookies and storage move to its successor; one that met a ban
(403/429) is retired with its cookies, since they may be what is banned. A retired
context closes when its last page does. At most ``contexts`` idle contexts stay open.
A browser that crashed is launched again on the next page. A page that does not close in
time retires its context (whose closing takes the page along).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page

__all__ = ["ContextPool", "Key", "Lease"]

logger = logging.getLogger(__name__)

Key = tuple[str, str]  # (proxy URL, context name)
CLOSE_TIMEOUT = 10.0  # seconds for a page or a context to close: one that hangs would hold its slot for ever
OPEN_TIMEOUT = 30.0  # seconds for a new page (here: Playwright's timeouts are its driver's, a wedged one keeps none)


class _Context:
    __slots__ = ("context", "key", "open", "retired", "served")

    def __init__(self, context: BrowserContext, key: Key) -> None:
        self.context = context
        self.key = key
        self.served = 0  # pages opened in it
        self.open = 0  # pages open now
        self.retired = False


@dataclass(slots=True)
class Lease:
    """A page lent for one request; set ``banned`` to retire its context (and its cookies)."""

    page: Page
    context: BrowserContext
    banned: bool = False


class ContextPool:
    """Pages for requests, in recycled browser contexts (see the module).

    Args:
        launch: starts a browser (again, after a crash).
        setup: prepares each new context (its routes).
        pages: pages open at once.
        context_pages: pages a context serves before it is retired; 0 never retires one.
        contexts: idle contexts kept open.
    """

    def __init__(
        self,
        launch: Callable[[], Awaitable[Browser]],
        setup: Callable[[BrowserContext], Awaitable[None]],
        *,
        pages: int,
        context_pages: int,
        contexts: int,
    ) -> None:
        self._launch = launch
        self._setup = setup
        self._browser: Browser | None = None
        self._slots = asyncio.Semaphore(pages)
        self._context_pages = context_pages
        self._contexts = contexts
        self._current: dict[Key, _Context] = {}  # where new pages of a key open, least recently used first
        self._retiring: set[_Context] = set()
        self._lock = asyncio.Lock()
        self.created = 0
        self.launches = 0

    async def start(self) -> None:
        self._browser = await self._launch()
        self.launches += 1

    @contextlib.asynccontextmanager
    async def page(self, key: Key, options: Callable[[], dict[str, Any]]) -> AsyncIterator[Lease]:
        """A new page in the context of ``key`` (made with ``options()`` if there is none), closed after."""
        async with self._slots:
            async with self._lock:
                slot = await self._checkout(key, options)
            lease: Lease | None = None
            try:
                async with asyncio.timeout(OPEN_TIMEOUT):
                    lease = Lease(await slot.context.new_page(), slot.context)
                yield lease
            finally:
                closed = lease is not None and await _close(lease.page)
                async with self._lock:  # a context that could not open or close a page is retired too
                    await self._checkin(slot, banned=not closed or lease is None or lease.banned)

    async def _checkout(self, key: Key, options: Callable[[], dict[str, Any]]) -> _Context:
        assert self._browser is not None
        if not self._browser.is_connected():
            await self._relaunch()
        slot = self._current.pop(key, None)  # put back last: the most recently used
        state = None
        if slot is not None and self._context_pages and slot.served >= self._context_pages:
            state = await _storage(slot.context)  # its cookies and storage go on in its successor
            await self._retire(slot)
            slot = None
        if slot is None:
            slot = await self._new(key, {**options(), "storage_state": state} if state else options())
        self._current[key] = slot
        slot.served += 1
        slot.open += 1
        await self._trim()
        return slot

    async def _relaunch(self) -> None:
        logger.warning("the browser has gone (crashed?): launching it again")
        self._current.clear()  # their contexts went with it
        self._retiring.clear()
        self._browser = await self._launch()
        self.launches += 1

    async def _new(self, key: Key, options: dict[str, Any]) -> _Context:
        assert self._browser is not None
        context = await self._browser.new_context(**options)
        try:
            await self._setup(context)
        except BaseException:
            await context.close()
            raise
        self.created += 1
        return _Context(context, key)

    async def _checkin(self, slot: _Context, *, banned: bool) -> None:
        slot.open -= 1
        if banned and not slot.retired:
            await self._retire(slot)
        elif slot.retired and not slot.open and slot in self._retiring:
            self._retiring.discard(slot)
            await _close(slot.context)
        await self._trim()

    async def _retire(self, slot: _Context) -> None:
        slot.retired = True
        if self._current.get(slot.key) is slot:
            del self._current[slot.key]
        if slot.open:
            self._retiring.add(slot)
        else:
            await _close(slot.context)

    async def _trim(self) -> None:
        """Close the least recently used idle contexts past ``contexts``."""
        excess = len(self._current) - self._contexts
        for key, slot in list(self._current.items()):
            if excess <= 0:
                break
            if not slot.open:
                del self._current[key]
                await _close(slot.context)
                excess -= 1

    async def close(self) -> None:
        slots = [*self._current.values(), *self._retiring]
        self._current.clear()
        self._retiring.clear()
        for slot in slots:
            await _close(slot.context)
        if self._browser is not None:
            with contextlib.suppress(Exception):
                await self._browser.close()
            self._browser = None


async def _storage(context: BrowserContext) -> Any:
    try:
        return await context.storage_state()
    except Exception as exc:  # a context the browser lost: its successor starts afresh
        logger.debug("storage state lost: %s", exc)
        return None


async def _close(closing: BrowserContext | Page) -> bool:
    """Close a page or a context; False if it did not close within ``CLOSE_TIMEOUT``."""
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await closing.close()
    except TimeoutError:
        logger.warning("a browser %s did not close within %ss", type(closing).__name__.lower(), CLOSE_TIMEOUT)
        return False
    except Exception as exc:  # already closed with a crashed browser
        logger.debug("closing: %s", exc)
    return True
