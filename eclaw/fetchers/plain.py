"""The HTTP fetcher: the one place that talks to aiohttp's client.

Redirects are followed by eclaw, hop by hop (:mod:`eclaw.fetchers.hops`),
so loops, hop limits and offsite hops are caught; bodies are streamed and refused
past ``max_response_size`` (counted after decompression, so a gzip bomb is cut off
early); aiohttp's exceptions are translated into :mod:`eclaw.exceptions`.

Each hop carries what :class:`~eclaw.fetchers.hops.HopHeaders` adds (the cookies of the
request's jar, the host's basic auth, the ``Referer``) and its ``Set-Cookie`` go to that
jar. A ``<meta http-equiv="refresh">`` is a hop like a 3xx (:mod:`eclaw.fetchers.refresh`);
``meta["dont_redirect"]`` (or a 3xx status the request or spider handles) stops at the first.

Politeness (:mod:`eclaw.fetchers.pacing`): the frontier hears when each request was sent, and a
connection to a polite host is closed after its response unless the host's next request may come
before keep-alive would expire. A request is sent once per attempt: aiohttp's own silent re-send
of a request whose connection was reset is off, so retrying is the ``Retry`` middleware's, but for
one case (:mod:`eclaw.fetchers.reuse`): a GET (HEAD...) that met a kept-alive connection the server
or proxy had closed meanwhile, before any byte of its answer, is sent once more (counted in ``resent``).

With ``meta["keep_received"]`` or the ``keep_received`` setting, the final hop's exchange as on the wire
is kept in ``response.received`` (:mod:`eclaw.http.wire`): the body is then read undecoded and decoded
here, under the same ``max_response_size`` bound.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import logging
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import aiohttp
from yarl import URL

from eclaw.exceptions import (
    BadRequest,
    ConfigError,
    ConnectError,
    ConnectionLost,
    DownloadError,
    DownloadTimeout,
    InvalidURL,
    ProxyError,
    ResponseTooLarge,
    TruncatedResponse,
)
from eclaw.fetchers.hops import REDIRECTS, Hop, HopHeaders, follow, hop_proxy
from eclaw.fetchers.pacing import KEEPALIVE, paced_requests
from eclaw.fetchers.refresh import refresh_target
from eclaw.fetchers.reuse import StaleConnection, reuse_aware_responses
from eclaw.fetchers.socks import SocksPools, is_socks, proxy_name
from eclaw.fetchers.tls import certificate_error, handshake_error
from eclaw.frontier.politeness import Prefetching
from eclaw.http import Request, Response
from eclaw.http.types import STREAM_TO, BodySink
from eclaw.http.wire import KEEP_RECEIVED, Received, Sent, decoder_for
from eclaw.security.scope import proxy_authorization
from eclaw.sessions.auth import HostAuth
from eclaw.sessions.jars import CookieJars

if TYPE_CHECKING:
    from eclaw.contracts import HopCheck
    from eclaw.frontier.politeness import Pacing
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["PlainFetcher"]

logger = logging.getLogger(__name__)

FALLBACK_USER_AGENT = "eclaw/0.1 (+https://pypi.org/project/eclaw/)"  # when no middleware sets one


class PlainFetcher:
    """aiohttp-based fetcher: one ``ClientSession`` per crawl."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._resolver: Any = None  # a resolver of ours (dns_resolver="async"), closed with the session
        self._jars: CookieJars | None = None
        self._pacing: Pacing | None = None
        self._check: HopCheck | None = None
        self.bytes_received = 0
        self.resent = 0  # requests sent once more: their kept-alive connection was closed under them

    def use_cookies(self, jars: CookieJars) -> None:
        """Keep cookies in the crawl's jars (else, with ``cookies`` on, in jars of its own)."""
        self._jars = jars

    def pace(self, pacing: Pacing) -> None:
        """Tell ``pacing`` when each request is sent, and ask it which connections to keep."""
        self._pacing = pacing

    def check_hops(self, check: HopCheck) -> None:
        """Have ``check`` vet each redirect hop (:class:`~eclaw.fetchers.base.VetsHops`)."""
        self._check = check

    async def open(self, spider: Spider, settings: Settings) -> None:
        self._settings = settings
        self._allowed = frozenset(d.lower() for d in spider.allowed_domains)
        self._handled = frozenset(spider.handle_httpstatus_list)
        jars = self._jars if self._jars is not None or not settings.cookies else CookieJars()
        auth = HostAuth(settings.http_auth, spider.http_auth)
        self._hops = HopHeaders(jars, auth, referer=settings.referer, sensitive=settings.sensitive_headers)
        self._timeout = aiohttp.ClientTimeout(
            total=settings.timeout,
            sock_connect=settings.connect_timeout,
            sock_read=settings.read_timeout or None,  # each chunk restarts a timer: off unless asked for
        )
        limit, per_host, verify = settings.concurrency, settings.concurrency_per_domain, settings.verify_tls
        names: dict[str, Any] = {"ttl_dns_cache": 300}  # the system's resolver (getaddrinfo in a thread)
        if settings.dns_resolver == "async":
            try:
                from eclaw.fetchers.dns import connector_options  # aiodns (77 ms to import): only when asked for
            except ImportError:
                raise ConfigError("dns_resolver='async' needs aiodns: pip install 'eclaw[dns]'") from None
            names = connector_options(settings)
        self._resolver = names.get("resolver")
        if self._resolver is not None and isinstance(self._pacing, Prefetching):  # names looked up before a slot
            self._pacing.resolve_with(self._resolver)
        direct = aiohttp.TCPConnector(
            limit=limit, limit_per_host=per_host, ssl=verify, keepalive_timeout=KEEPALIVE, **names
        )
        self._session = self._new_session(direct)
        self._socks = SocksPools(self._new_session, limit=limit, limit_per_host=per_host, ssl=verify)

    def _new_session(self, connector: aiohttp.BaseConnector) -> aiohttp.ClientSession:
        pacing = self._pacing
        session = aiohttp.ClientSession(
            connector=connector,
            request_class=aiohttp.ClientRequest if pacing is None else paced_requests(pacing),
            response_class=reuse_aware_responses(),
            cookie_jar=aiohttp.DummyCookieJar(),  # cookies are eclaw's: a jar per request (HopHeaders)
            timeout=self._timeout,
            headers={"User-Agent": self._settings.user_agent or FALLBACK_USER_AGENT},
            auto_decompress=True,
            raise_for_status=False,
            max_line_size=16384,
            max_field_size=16384,
        )
        # aiohttp sends a request again, at once, when its connection was closed or reset; with no
        # public switch (aio-libs/aiohttp#10790), this is how aiohttp's own test client turns it off.
        session._retry_connection = False
        return session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            await self._socks.close()
            self._session = None
        if self._resolver is not None:  # aiohttp closes only a resolver it made itself
            await self._resolver.close()
            self._resolver = None

    async def fetch(self, request: Request) -> Response:
        if self._session is None:
            raise RuntimeError("fetcher is not open")
        if not self._keeps(request):
            return await follow(
                request, self._fetch_once, self._allowed, self._settings.max_redirects, check=self._check
            )
        kept: list[Received] = []

        async def send(sent: Request, url: str, method: str, body: bytes, chain: Sequence[str]) -> Hop:
            return await self._fetch_once(sent, url, method, body, chain, kept)

        response = await follow(request, send, self._allowed, self._settings.max_redirects, check=self._check)
        response.received = dataclasses.replace(kept[-1], redirects=tuple(kept[:-1]))  # the hops: archives keep them
        return response

    def _keeps(self, request: Request) -> bool:
        """Whether to keep ``request``'s exchange as on the wire (never for a body read in part: robots.txt)."""
        meta = request._meta
        if meta and ("max_body_bytes" in meta or STREAM_TO in meta):
            return False
        return bool(meta.get(KEEP_RECEIVED, self._settings.keep_received) if meta else self._settings.keep_received)

    async def _fetch_once(
        self,
        request: Request,
        url: str,
        method: str,
        body: bytes,
        chain: Sequence[str],
        kept: list[Received] | None = None,
    ) -> Hop:
        assert self._session is not None
        proxy, proxy_headers = _proxy(request, await hop_proxy(request, url, chain))
        session = self._session
        if proxy is not None and is_socks(proxy):  # a connection pool through that proxy
            session, proxy, shown = self._socks.session(proxy), None, proxy
        else:
            shown = proxy
        headers = self._hops.headers(request, url, chain)
        if proxy_headers and url.startswith("http:"):  # plain HTTP goes to the proxy as is: no CONNECT
            headers = {**headers, **proxy_headers}
        try:
            async with await self._send(
                session,
                method,
                url,
                headers=headers,
                data=body or None,
                allow_redirects=False,
                proxy=proxy,
                proxy_headers=proxy_headers,
                timeout=self._timeout_of(request),
                auto_decompress=kept is None,
            ) as resp:
                return await self._answer(resp, request, url, method, body, kept)
        except DownloadError:
            raise
        except self._socks.errors as exc:
            raise ProxyError(f"proxy {proxy_name(shown)} failed for {url}: {_short(exc)}") from exc
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise DownloadTimeout(f"timeout fetching {url}") from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise ConnectionLost(f"server disconnected: {url}") from exc
        except aiohttp.ClientPayloadError as exc:
            raise TruncatedResponse(f"bad or truncated body from {url}: {_short(exc)}") from exc
        except (aiohttp.ClientProxyConnectionError, aiohttp.ClientHttpProxyError) as exc:
            raise ProxyError(f"proxy {proxy_name(shown)} failed for {url}: {_short(exc)}") from exc
        except aiohttp.ClientSSLError as exc:
            raise _tls_error(url, exc) from exc
        except aiohttp.ClientOSError as exc:
            if isinstance(exc, aiohttp.ClientConnectorError):
                raise ConnectError(f"cannot connect to {url}: {_short(exc)}") from exc
            raise ConnectionLost(f"connection lost: {url}: {_short(exc)}") from exc
        except aiohttp.ClientResponseError as exc:
            raise DownloadError(f"bad response from {url}: {_short(exc)}") from exc
        except aiohttp.InvalidURL as exc:
            raise InvalidURL(f"malformed URL {url!r}") from exc
        except aiohttp.ClientError as exc:
            raise DownloadError(f"download of {url} failed: {_short(exc)}") from exc
        except ValueError as exc:  # aiohttp refusing the request itself (conflicting auth, bad header...)
            raise BadRequest(f"cannot send {url}: {_short(exc)}") from exc

    async def _answer(
        self,
        resp: aiohttp.ClientResponse,
        request: Request,
        url: str,
        method: str,
        body: bytes,
        kept: list[Received] | None,
    ) -> Hop:
        """One hop's answer: a redirect to follow (its Location), or the page, its body read."""
        self._hops.received(request, url, resp.headers)
        location = resp.headers.get("Location")
        if resp.status in REDIRECTS and location and self._follows(request, resp.status):
            if kept is not None:  # the hop's exchange too, its body read (bounded) as a 200's is
                await self._read_wire(resp, url, method, body, kept)
            return resp.status, resp.headers, b"", location
        if kept is not None:
            data = await self._read_wire(resp, url, method, body, kept)
        else:
            data = await self._read_body(resp, url, request)
        return resp.status, resp.headers, data, self._refresh(request, url, resp, data)

    async def _send(
        self, session: aiohttp.ClientSession, method: str, url: str, **options: Any
    ) -> aiohttp.ClientResponse:
        """The response's head; a safe request whose kept-alive connection was closed under it, before
        any byte of the answer (:class:`~eclaw.fetchers.reuse.StaleConnection`), goes once more."""
        try:
            return await session.request(method, url, **options)
        except StaleConnection:
            self.resent += 1
            logger.debug("%s %s: the kept-alive connection was closed under it; sending it once more", method, url)
        return await session.request(method, url, **options)

    def _timeout_of(self, request: Request) -> aiohttp.ClientTimeout:
        """``meta["download_timeout"]``: this request's seconds in all (else the session's timeouts)."""
        meta = request._meta
        seconds = meta.get("download_timeout") if meta else None
        timeout = self._timeout
        if seconds is None:
            return timeout  # never None: aiohttp reads None as "no timeout at all"
        return aiohttp.ClientTimeout(
            total=float(seconds),
            sock_connect=min(timeout.sock_connect or float(seconds), float(seconds)),
            sock_read=timeout.sock_read,
        )

    def _follows(self, request: Request, status: int) -> bool:
        """Whether to follow a redirect: not with ``dont_redirect``, nor for a status the request or spider handles."""
        meta = request._meta  # not request.meta: that would give every request a dict
        if meta and (meta.get("dont_redirect") or meta.get("handle_httpstatus_all")):
            return False
        if meta and status in meta.get("handle_httpstatus_list", ()):
            return False
        return status not in self._handled

    def _refresh(self, request: Request, url: str, resp: aiohttp.ClientResponse, data: bytes) -> str | None:
        """Where a ``<meta http-equiv="refresh">`` page sends the browser, when that is to be followed."""
        settings = self._settings
        if not settings.meta_refresh or not 200 <= resp.status < 300:
            return None
        target = refresh_target(url, resp.headers, data, settings.meta_refresh_max_delay)
        return target if target is not None and self._follows(request, resp.status) else None

    async def _read_body(self, resp: aiohttp.ClientResponse, url: str, request: Request) -> bytes:
        limit, keep, meta = self._settings.max_response_size, None, request._meta
        if meta:
            keep = meta.get("max_body_bytes")  # read that much, no more (robots.txt)
            limit = meta.get("max_response_size", limit)
            sink = meta.get(STREAM_TO)
            if sink is not None and 200 <= resp.status < 300:
                await self._stream(resp, url, sink, limit)
                return b""
        declared = resp.content_length
        if declared is not None and declared > limit and keep is None:
            raise ResponseTooLarge(f"{url}: Content-Length {declared} > max_response_size {limit}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_any():
            if keep is not None and size + len(chunk) >= keep:
                chunks.append(chunk[: keep - size])
                size = keep
                break
            size += len(chunk)
            if size > limit:
                raise ResponseTooLarge(f"{url}: body over max_response_size {limit}")
            chunks.append(chunk)
        self.bytes_received += size
        return b"".join(chunks)

    async def _stream(self, resp: aiohttp.ClientResponse, url: str, sink: BodySink, limit: int) -> None:
        """The body to ``sink``, chunk by chunk, never whole in memory; at most ``limit`` bytes."""
        declared = resp.content_length
        if declared is not None and declared > limit:
            raise ResponseTooLarge(f"{url}: Content-Length {declared} > max_response_size {limit}")
        await sink.begin()
        size = 0
        async for chunk in resp.content.iter_chunked(256 * 1024):
            size += len(chunk)
            if size > limit:
                raise ResponseTooLarge(f"{url}: body over max_response_size {limit}")
            await sink.write(chunk)
        self.bytes_received += size

    async def _read_wire(
        self, resp: aiohttp.ClientResponse, url: str, method: str, body: bytes, kept: list[Received]
    ) -> bytes:
        """The decoded body, the exchange as on the wire appended to ``kept``; ``max_response_size``
        bounds the bytes received and the bytes decoded."""
        limit, date, ip = self._settings.max_response_size, dt.datetime.now(dt.UTC), _peer(resp)
        declared = resp.content_length
        if declared is not None and declared > limit:
            raise ResponseTooLarge(f"{url}: Content-Length {declared} > max_response_size {limit}")
        decoder = decoder_for(resp.headers.get("Content-Encoding"), limit, url)
        raw: list[bytes] = []
        decoded: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
            if size > limit:
                raise ResponseTooLarge(f"{url}: body over max_response_size {limit}")
            raw.append(chunk)
            if decoder is not None:
                decoded.append(decoder.feed(chunk))
        self.bytes_received += size
        wire = b"".join(raw)
        sent = Sent(method, url, tuple(resp.request_info.headers.items()), body)
        headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers)
        version = f"{resp.version.major}.{resp.version.minor}" if resp.version else "1.1"
        kept.append(Received(version, resp.status, resp.reason or "", headers, wire, date, ip, sent))
        return b"".join(decoded) if decoder is not None else wire


def _peer(resp: aiohttp.ClientResponse) -> str | None:
    """The server's address: its connection's, or (a body read at once releases the connection to the
    pool) its protocol's, which aiohttp keeps; ``None`` once the connection is closed."""
    connection = resp.connection
    protocol = connection.protocol if connection is not None else resp._protocol
    transport = protocol.transport if protocol is not None else None
    peer = transport.get_extra_info("peername") if transport is not None else None
    return str(peer[0]) if peer else None


def _tls_error(url: str, exc: aiohttp.ClientSSLError) -> DownloadError:
    """A failed TLS handshake: a certificate that does not verify or a protocol mismatch fails at
    once, with its own reason; a connection cut mid-handshake is a connect error (retried)."""
    cause = exc.os_error
    if isinstance(cause, ssl.SSLCertVerificationError):
        return certificate_error(url, cause.verify_message or cause.reason or _short(cause))
    if not isinstance(cause, ssl.SSLError) or isinstance(cause, ssl.SSLEOFError | ssl.SSLSyscallError):
        return ConnectError(f"cannot connect to {url}: {_short(exc)}")
    return handshake_error(url, cause.reason or "handshake failed")


def _proxy(request: Request, proxy: str | None) -> tuple[str | None, dict[str, str] | None]:
    """A hop's ``proxy`` and its ``Proxy-Authorization`` header: the proxy URL's credentials, else the
    request's own header when it is meant for that proxy (:func:`~eclaw.security.scope.proxy_authorization`)."""
    if not proxy or is_socks(proxy):  # a SOCKS proxy's credentials go to its connector
        return proxy or None, None
    parsed = URL(proxy)
    if parsed.user is None:
        meta = request._meta
        own = proxy_authorization(request._headers, meta.get("proxy") if meta else None, proxy)
        return proxy, {"Proxy-Authorization": own} if own else None
    token = base64.b64encode(f"{parsed.user}:{parsed.password or ''}".encode()).decode("ascii")
    return str(parsed.with_user(None)), {"Proxy-Authorization": f"Basic {token}"}


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
