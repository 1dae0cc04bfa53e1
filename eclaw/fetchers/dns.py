"""Name resolution for broad crawls: an aiohttp resolver on ``aiodns`` (c-ares) with a shared cache.

One :class:`CachingResolver` serves a whole crawl. It answers IP literals and ``localhost``
without a query, caches each answer for its own TTL (clamped to ``[ttl_min, ttl_max]``),
caches failures (NXDOMAIN, no answer) for ``negative_ttl``, shares one query among all the
callers waiting on the same name, and bounds the lookups in flight with a semaphore. A failed
lookup raises :class:`~eclaw.exceptions.DnsError` (reason ``dns``); a timeout or server failure
is tried again up to ``retries`` times inside the resolver, NXDOMAIN never.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import aiodns
from aiohttp.abc import AbstractResolver, ResolveResult

if TYPE_CHECKING:
    from eclaw.settings import Settings

from eclaw.exceptions import DnsError

LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain"})
NOT_RETRIED = frozenset({aiodns.error.ARES_ENOTFOUND, aiodns.error.ARES_ENODATA})


def _result(host: str, addr: str, port: int, family: int) -> ResolveResult:
    return ResolveResult(hostname=host, host=addr, port=port, family=family, proto=0, flags=socket.AI_NUMERICHOST)


class CachingResolver(AbstractResolver):
    """A TTL-respecting, de-duplicating, bounded resolver shared by a crawl's connectors."""

    def __init__(
        self,
        *,
        servers: list[str] | None = None,
        ttl_min: float = 30.0,
        ttl_max: float = 3600.0,
        negative_ttl: float = 30.0,
        max_in_flight: int = 500,
        retries: int = 1,
        timeout: float = 5.0,
    ) -> None:
        self._dns = aiodns.DNSResolver(nameservers=servers or None, timeout=timeout, tries=1)
        self._ttl_min, self._ttl_max, self._negative_ttl = ttl_min, ttl_max, negative_ttl
        self._retries = retries
        self._slots = asyncio.Semaphore(max_in_flight)
        self._cache: dict[str, tuple[float, list[str] | DnsError]] = {}
        self._pending: dict[str, asyncio.Future[list[str]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # held until done: the loop keeps weak refs
        self.queries = 0  # queries sent to a server (not cache hits), for stats and tests
        self.in_flight = 0
        self.peak_in_flight = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve ``host`` to IPv4 addresses (cached); raise :class:`DnsError` when it fails."""
        try:
            literal = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        if literal is not None:
            fam = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
            return [_result(host, str(literal), port, fam)]
        if host.lower() in LOCAL_NAMES:
            return [_result(host, "127.0.0.1", port, socket.AF_INET)]
        addrs = await self.lookup(host.lower().rstrip("."))
        return [_result(host, addr, port, socket.AF_INET) for addr in addrs]

    def prefetch(self, host: str, ready: Callable[[], None]) -> bool:
        """True when ``host`` needs no wait (a literal, localhost, or a fresh cached answer or
        failure); else start (or join) its lookup, call ``ready`` when it ends, and return False.

        For a frontier: keep a host's requests back while this is False, so a slow name holds
        neither a download slot nor the host's politeness turn.
        """
        name = host.strip("[]").lower().rstrip(".")
        cached = self._cache.get(name)  # first: the common case, a known name, costs one lookup
        if cached is not None and cached[0] > time.monotonic():
            return True
        if name in LOCAL_NAMES:
            return True
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            pass
        task = self._spawn(self._settle(name))
        task.add_done_callback(lambda _: ready())
        return False

    async def _settle(self, name: str) -> None:
        with contextlib.suppress(DnsError):  # cached as a failure: the download meets it at once
            await self.lookup(name)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def lookup(self, name: str) -> list[str]:
        """The addresses of ``name``, from the cache, a query in flight, or a new query."""
        cached = self._cache.get(name)
        if cached is not None and cached[0] > time.monotonic():
            if isinstance(cached[1], DnsError):
                raise DnsError(str(cached[1]))
            return cached[1]
        pending = self._pending.get(name)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._pending[name] = pending
            self._spawn(self._query(name, pending))
        return list(await asyncio.shield(pending))

    async def _query(self, name: str, future: asyncio.Future[list[str]]) -> None:
        try:
            async with self._slots:
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                try:
                    addrs, ttl = await self._ask(name)
                finally:
                    self.in_flight -= 1
            ttl = min(max(ttl, self._ttl_min), self._ttl_max)
            self._cache[name] = (time.monotonic() + ttl, addrs)
            future.set_result(addrs)
        except DnsError as exc:
            self._cache[name] = (time.monotonic() + self._negative_ttl, exc)
            future.set_exception(exc)
        except asyncio.CancelledError:  # the resolver closed: whoever waits is told, not left hanging
            future.set_exception(DnsError(f"cannot resolve {name}: the resolver is closed"))
            raise
        finally:
            self._pending.pop(name, None)
            if future.done() and future.exception() is not None:
                future.exception()  # retrieved: no "never retrieved" warning when nobody waits

    async def _ask(self, name: str) -> tuple[list[str], float]:
        for attempt in range(self._retries + 1):
            self.queries += 1
            try:
                result: Any = await self._dns.query_dns(name, "A")
            except aiodns.error.DNSError as exc:
                code = exc.args[0] if exc.args else None
                if code in NOT_RETRIED or attempt == self._retries:
                    raise DnsError(f"cannot resolve {name}: {exc.args[-1]}") from None
                continue
            records = [r for r in result.answer if r.type == "A" or getattr(r, "type", None) == 1]
            addrs = [r.data.addr for r in records]
            if not addrs:
                raise DnsError(f"cannot resolve {name}: no address")
            return addrs, float(min(r.ttl for r in records))
        raise DnsError(f"cannot resolve {name}")  # unreachable: the loop returns or raises

    async def close(self) -> None:
        """Stop the lookups still waiting or in flight (their callers get :class:`DnsError`), then the
        c-ares channel."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for name, future in self._pending.items():  # a lookup cancelled before it began runs no handler
            if not future.done():
                future.set_exception(DnsError(f"cannot resolve {name}: the resolver is closed"))
                future.exception()  # retrieved: nobody may be waiting any more
        self._pending.clear()
        await self._dns.close()


def connector_options(settings: Settings) -> dict[str, Any]:
    """The keyword arguments a crawl's ``aiohttp.TCPConnector`` needs for its name resolution.

    ``dns_resolver="async"`` gives a :class:`CachingResolver` (and turns aiohttp's own cache
    off: ours respects TTLs; close it with the connector: aiohttp does not); ``"system"`` keeps
    aiohttp's threaded ``getaddrinfo`` with its 300 s cache.
    """
    if settings.dns_resolver != "async":
        return {"ttl_dns_cache": 300}
    resolver = CachingResolver(
        servers=[s.strip() for s in settings.dns_servers.split(",") if s.strip()] or None,
        ttl_min=settings.dns_cache_ttl_min,
        ttl_max=settings.dns_cache_ttl_max,
        negative_ttl=settings.dns_negative_ttl,
        max_in_flight=settings.dns_max_in_flight,
        retries=settings.dns_retries,
    )
    return {"resolver": resolver, "use_dns_cache": False}
