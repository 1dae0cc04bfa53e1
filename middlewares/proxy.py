"""Proxy: rotate requests over forward proxies, benching the ones that fail."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from yarl import URL

from eclaw.contracts import Fetch
from eclaw.exceptions import ConfigError, ConnectError, DownloadTimeout, HttpError, ProxyError
from eclaw.fetchers.hops import PROXY_CHOOSER
from eclaw.fetchers.socks import SOCKS_SCHEMES
from eclaw.http import Request, Response
from eclaw.http.urls import host_allowed, url_host

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext

__all__ = ["HopProxies", "Proxy", "ProxyState"]

logger = logging.getLogger(__name__)

PROXY_SCHEMES = frozenset({"http", "https", *SOCKS_SCHEMES})
Strategy = Literal["round-robin", "random", "least-recently-failed"]


class ProxyState:
    """One proxy: its URL (with credentials), a display name without them, and its health."""

    __slots__ = ("benched_until", "failures", "last_failure", "name", "schemes", "url", "uses")

    def __init__(self, url: str, schemes: frozenset[str] = frozenset({"http", "https"})) -> None:
        if "://" not in url:
            raise ConfigError(f"bad proxy {_redact(url)!r}: no scheme (use http://host:port or socks5://host:port)")
        parsed = URL(url.strip())
        if parsed.scheme not in PROXY_SCHEMES or not parsed.host:
            kind = f"{parsed.scheme} proxies are not supported" if parsed.scheme else "not a proxy URL"
            supported = "http, https, socks4, socks5 or socks5h"
            raise ConfigError(f"bad proxy {_redact(url)!r}: {kind} (use {supported})")
        if parsed.scheme in SOCKS_SCHEMES and not f"{parsed.user or ''}{parsed.password or ''}".isascii():
            raise ConfigError(f"bad proxy {_redact(url)!r}: SOCKS user names and passwords must be ASCII")
        self.url = str(parsed)
        self.name = f"{parsed.host}:{parsed.explicit_port or parsed.port}"  # never the credentials
        self.schemes = schemes
        self.failures = 0  # in a row
        self.last_failure = 0.0
        self.benched_until = 0.0
        self.uses = 0

    def __repr__(self) -> str:
        return f"<proxy {self.name}>"


class Proxy:
    """Send requests through forward proxies, rotating and health-checking them.

    A proxy that fails ``max_failures`` times in a row (connection errors,
    timeouts, 407, a status in ``ban_statuses``, or a body matching
    ``ban_pattern``) is benched for ``cooldown`` seconds, then tried again. A
    banned response is raised as ``ProxyError`` so ``Retry`` sends the request
    again through another proxy. When every proxy is benched the request waits
    for the first to come back, or, with ``when_all_benched="fail"``, the crawl
    stops with a clear error. Credentials (``http://user:pass@host:port``)
    never appear in logs, stats or failure records: proxies are named
    ``host:port`` there. The proxy is chosen again for every redirect hop (rotation, the scheme
    and ``no_proxy`` of the hop's own URL: :class:`HopProxies`); a proxy's credentials go to that
    proxy only. A request whose ``meta["proxy"]`` is already set keeps it, on every hop.

    Args:
        proxies: proxy URLs, or the path of a file with one per line.
        strategy: "round-robin", "random" or "least-recently-failed".
        sticky: keep one proxy per host while it is healthy.
    """

    def __init__(
        self,
        proxies: Iterable[str] | str | Path,
        *,
        strategy: Strategy = "round-robin",
        sticky: bool = False,
        max_failures: int = 3,
        cooldown: float = 60.0,
        ban_statuses: Iterable[int] = (403, 429),
        ban_pattern: str | None = None,
        when_all_benched: Literal["wait", "fail"] = "wait",
        no_proxy: Iterable[str] = (),
        rng: random.Random | None = None,
    ) -> None:
        if strategy not in ("round-robin", "random", "least-recently-failed"):
            raise ConfigError(f"Proxy: unknown strategy {strategy!r}")
        if when_all_benched not in ("wait", "fail"):
            raise ConfigError(f"Proxy: when_all_benched must be 'wait' or 'fail', not {when_all_benched!r}")
        if isinstance(proxies, str | Path):
            proxies = _read_list(Path(proxies))
        self.proxies = [p if isinstance(p, ProxyState) else ProxyState(p) for p in proxies]
        if not self.proxies:
            raise ConfigError("Proxy: no proxies given")
        self.strategy = strategy
        self.sticky = sticky
        self.max_failures = max(1, max_failures)
        self.cooldown = cooldown
        self.ban_statuses = frozenset(ban_statuses) | {407}
        self.ban_pattern = re.compile(ban_pattern.encode()) if ban_pattern else None
        self.when_all_benched = when_all_benched
        self.no_proxy = frozenset(h.strip().lower().lstrip(".") for h in no_proxy if h.strip() and h.strip() != "*")
        self.no_proxy_all = any(h.strip() == "*" for h in no_proxy)
        self._rng = rng or random.Random()
        self._cycle = itertools.cycle(self.proxies)
        self._by_host: dict[str, ProxyState] = {}
        self._waiting_until = 0.0
        self._crawl: CrawlContext | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: object) -> Proxy:
        """Proxies of ``HTTP_PROXY`` / ``HTTPS_PROXY`` (any case), each for its scheme, ``ALL_PROXY`` for a
        scheme without one; ``NO_PROXY`` honoured (``*``: every host direct). Chosen again on every redirect hop."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str:
            return env.get(name) or env.get(name.lower()) or ""

        by_url: dict[str, set[str]] = {}
        for scheme in ("http", "https"):
            url = (get(f"{scheme.upper()}_PROXY") or get("ALL_PROXY")).strip()
            if url:
                by_url.setdefault(url, set()).add(scheme)
        if not by_url:
            raise ConfigError("proxies=env: neither HTTP_PROXY nor HTTPS_PROXY is set (nor ALL_PROXY)")
        states = [ProxyState(url, frozenset(schemes)) for url, schemes in by_url.items()]
        no_proxy = [h for h in get("NO_PROXY").split(",") if h.strip()]
        return cls(states, no_proxy=no_proxy, **options)  # type: ignore[arg-type]

    @classmethod
    def from_setting(cls, value: str) -> Proxy:
        """The ``proxies`` setting: ``env``, ``@file`` or comma-separated URLs."""
        if value.strip() == "env":
            return cls.from_env()
        if value.startswith("@"):
            return cls(Path(value[1:]))
        return cls([p for p in value.split(",") if p.strip()])

    def __repr__(self) -> str:
        return f"Proxy({[p.name for p in self.proxies]}, strategy={self.strategy!r})"

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        self._by_host.clear()

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        meta = request.meta
        if meta.get("proxy") or request.url.partition(":")[0].lower() not in ("http", "https"):
            return await call_next(request)  # a proxy set by hand is the request's on every hop
        hops = HopProxies(self)
        first = await hops.choose(request.url)
        sent = request.replace(meta={**meta, PROXY_CHOOSER: hops, **({"proxy": first.url} if first else {})})
        try:
            response = await call_next(sent)
        except HttpError as exc:
            _forget(exc.response.request)
            if hops.last is not None and exc.status in self.ban_statuses:
                raise self._banned(hops.last, f"http {exc.status}") from exc
            if hops.last is not None:
                self._ok(hops.last)
            raise
        except (ConnectError, DownloadTimeout) as exc:
            if hops.last is not None:
                self._failed(hops.last, exc.reason)
            raise
        finally:
            _forget(sent)
        _forget(response.request)  # a middleware inside may have sent a copy of the request
        proxy = hops.last
        if proxy is None:
            return response
        if response.status in self.ban_statuses:
            raise self._banned(proxy, f"http {response.status}")
        if self.ban_pattern is not None and self.ban_pattern.search(response.body):
            raise self._banned(proxy, "ban pattern in body")
        self._ok(proxy)
        return response

    async def choose(self, url: str) -> ProxyState | None:
        """The proxy for a hop to ``url`` (counted as used), or ``None`` for one sent direct
        (``no_proxy``, or a scheme no proxy takes); re-chosen for every redirect hop."""
        scheme = url.partition(":")[0].lower()
        if scheme not in ("http", "https") or self._bypass(url):
            return None
        proxy = await self._choose(url, scheme)
        proxy.uses += 1
        return proxy

    def _bypass(self, url: str) -> bool:
        return self.no_proxy_all or (bool(self.no_proxy) and host_allowed(url_host(url), self.no_proxy))

    async def _choose(self, url: str, scheme: str) -> ProxyState:
        while True:
            now = time.monotonic()
            usable = [p for p in self.proxies if scheme in p.schemes]
            if not usable:
                raise ProxyError(f"no proxy configured for {scheme}:// URLs")
            ready = [p for p in usable if p.benched_until <= now]
            if ready:
                return self._pick(url, ready)
            if self.when_all_benched == "fail":
                if self._crawl is not None:
                    self._crawl.stop("all proxies benched")
                raise ProxyError(f"all {len(usable)} proxies are benched after repeated failures")
            wake = min(p.benched_until for p in usable)
            if self._waiting_until != wake:  # once per outage, not once per waiting request
                self._waiting_until = wake
                logger.warning("all proxies benched; waiting %.1fs for one to come back", wake - now)
            await asyncio.sleep(wake - now)

    def _pick(self, url: str, ready: list[ProxyState]) -> ProxyState:
        host = url_host(url) if self.sticky else ""
        if self.sticky and self._by_host.get(host) in ready:
            return self._by_host[host]
        if self.strategy == "random":
            chosen = self._rng.choice(ready)
        elif self.strategy == "least-recently-failed":
            chosen = min(ready, key=lambda p: (p.last_failure, p.uses))
        else:
            chosen = next(p for p in self._cycle if p in ready)
        if self.sticky:
            self._by_host[host] = chosen
        return chosen

    def _count(self, proxy: ProxyState, what: str) -> None:
        if self._crawl is not None:
            self._crawl.stats.counters[f"proxy {proxy.name} {what}"] += 1

    def _ok(self, proxy: ProxyState) -> None:
        proxy.failures = 0
        self._count(proxy, "ok")

    def _failed(self, proxy: ProxyState, reason: str) -> None:
        proxy.failures += 1
        proxy.last_failure = time.monotonic()
        self._count(proxy, "failed")
        if proxy.failures >= self.max_failures:
            proxy.benched_until = proxy.last_failure + self.cooldown
            proxy.failures = 0
            self._count(proxy, "benched")
            logger.warning(
                "proxy %s benched for %.0fs after %d failures in a row (last: %s)",
                proxy.name,
                self.cooldown,
                self.max_failures,
                reason,
            )

    def _banned(self, proxy: ProxyState, reason: str) -> ProxyError:
        self._count(proxy, "banned")
        self._failed(proxy, f"banned: {reason}")
        return ProxyError(f"proxy {proxy.name} looks banned ({reason})")


class HopProxies:
    """The proxies of one request's hops (a :class:`~eclaw.contracts.ChoosesProxy`): each redirect hop
    goes through the proxy its own URL calls for; :attr:`last` is the one of the latest hop, whose
    health the response tells."""

    __slots__ = ("_proxy", "last")

    def __init__(self, proxy: Proxy) -> None:
        self._proxy = proxy
        self.last: ProxyState | None = None

    def __repr__(self) -> str:
        return f"<proxies per hop, last {self.last!r}>"

    async def choose(self, url: str) -> ProxyState | None:
        self.last = await self._proxy.choose(url)
        return self.last

    async def proxy_for(self, url: str) -> str | None:
        chosen = await self.choose(url)
        return chosen.url if chosen is not None else None

    def whole(self) -> tuple[str, tuple[str, ...]] | None:
        """The policy as one proxy for every proxied hop and the hosts that go direct (``no_proxy``),
        for a client that chooses per hop itself (the browser); ``None`` when it is not one proxy."""
        proxy = self._proxy
        if len(proxy.proxies) != 1 or proxy.no_proxy_all or proxy.proxies[0].schemes != {"http", "https"}:
            return None
        return proxy.proxies[0].url, tuple(sorted(proxy.no_proxy))


def _forget(request: Request) -> None:
    """Take the chooser out of a request the crawl keeps (its meta holds JSON values only)."""
    if request._meta:
        request._meta.pop(PROXY_CHOOSER, None)


def _read_list(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read proxy list {path}: {exc.strerror}") from None
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _redact(url: str) -> str:
    """``url`` without its credentials, for messages."""
    url = url.strip()
    if "://" not in url:
        return url.rpartition("@")[2]
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}"
