"""The impersonating fetcher: a browser's TLS and HTTP/2 fingerprint, through curl_cffi.

The one place that talks to curl_cffi (``pip install 'eclaw[impersonate]'``), imported
when the fetcher opens, so eclaw imports without it. It behaves as the plain fetcher
does where users rely on it: redirects followed by eclaw hop by hop
(:mod:`eclaw.fetchers.hops`); bodies refused past ``max_response_size`` as they arrive
(curl counts them after decompression, so a gzip bomb is cut off early); a request with
``meta["stream_to"]`` (:class:`~eclaw.http.types.BodySink`, as the plain fetcher honours it) goes
through curl_cffi's streaming API, in a second session sharing the cookie jar: its 2xx body is
written to the sink chunk by chunk, never whole in memory, under its own
``meta["max_response_size"]`` (else the setting), counted here; the same timeouts,
``verify_tls``, cookies per crawl and ``meta["proxy"]`` (chosen again for each redirect hop); the
request's own credentials and ``http_auth`` on each hop as :mod:`eclaw.security.scope` says (a
``Proxy-Authorization`` header goes to the proxy, never through the tunnel); curl's errors become
:mod:`eclaw.exceptions` here.

HTTP/2 is negotiated by ALPN, as the browser does; ``response.meta["http_version"]``
says what was used (``"HTTP/2"``, ``"HTTP/1.1"``, ...).

**User-Agent.** The impersonated browser's own headers (``User-Agent``, ``Accept``,
``Accept-Language``, ``sec-ch-ua``...) go with its fingerprint: a UA that another
browser's TLS handshake contradicts gives a crawler away. So the browser UA the
``UserAgent`` middleware adds by default (one of ``eclaw.middlewares.BROWSERS``, with
its ``Accept`` headers) is left out; a ``User-Agent`` of the request's own, or any
when the spider's ``user_agent`` or the ``user_agent`` setting names one, is sent as is.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import difflib
import logging
import math
import re
import ssl
import typing
from collections.abc import Awaitable, Coroutine, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from multidict import CIMultiDict, CIMultiDictProxy

from eclaw.exceptions import (
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
from eclaw.fetchers.hops import REDIRECTS, Hop, follow, hop_proxy
from eclaw.fetchers.tls import certificate_error, handshake_error
from eclaw.http import Request, Response
from eclaw.http.types import STREAM_TO, BodySink
from eclaw.http.urls import redact_url
from eclaw.security.headers import sensitive_headers
from eclaw.security.scope import proxy_authorization, scoped, why_not_carried
from eclaw.sessions.auth import HostAuth

if TYPE_CHECKING:
    from curl_cffi.requests import AsyncSession
    from curl_cffi.requests import Response as CurlResponse
    from curl_cffi.requests.exceptions import RequestException

    from eclaw.contracts import HopCheck
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["ImpersonateFetcher"]

logger = logging.getLogger(__name__)

INSTALL = "pip install 'eclaw[impersonate]'"
_HTTP_VERSIONS = {1: "HTTP/1.0", 2: "HTTP/1.1", 3: "HTTP/2", 30: "HTTP/3"}  # CURLINFO_HTTP_VERSION
_CURL_MESSAGE = re.compile(r"curl: \(\d+\) (.*?)(?:\. See https://curl\.se/\S*.*)?$", re.S)


class ImpersonateFetcher:
    """curl_cffi-based fetcher passing for the browser of the ``impersonate`` setting: one
    ``AsyncSession`` (connections, HTTP/2 streams and cookies) per crawl."""

    def __init__(self) -> None:
        self._session: AsyncSession[Any] | None = None
        self._streaming: AsyncSession[Any] | None = None
        self._check: HopCheck | None = None
        self._stopping: set[asyncio.Task[None]] = set()  # transfers told to stop, till curl hands their handle back

    def check_hops(self, check: HopCheck) -> None:
        """Have ``check`` vet each redirect hop (:class:`~eclaw.fetchers.base.VetsHops`)."""
        self._check = check

    async def open(self, spider: Spider, settings: Settings) -> None:
        try:  # the extra is imported here, when a crawl needs it, never with eclaw
            from curl_cffi import CurlOpt
            from curl_cffi.requests import AsyncSession
            from curl_cffi.requests.exceptions import RequestException
        except ImportError:
            raise ConfigError(f"the impersonate fetcher needs curl_cffi: {INSTALL}") from None
        from eclaw.middlewares.user_agent import BROWSERS  # the UAs the UserAgent middleware adds

        self._settings = settings
        self._errors = RequestException
        self._sensitive = sensitive_headers(settings.sensitive_headers)
        self._auth = HostAuth(settings.http_auth, spider.http_auth)
        self._allowed = frozenset(d.lower() for d in spider.allowed_domains)
        self._stock = {} if spider.user_agent or settings.user_agent else {ua: rest for ua, *rest in BROWSERS}
        options: dict[CurlOpt, int | str] = {CurlOpt.CONNECTTIMEOUT_MS: math.ceil(settings.connect_timeout * 1000)}
        cafile = ssl.get_default_verify_paths().cafile  # Python's (the system's, or SSL_CERT_FILE), as plain's
        if settings.verify_tls and cafile:
            options[CurlOpt.CAINFO] = options[CurlOpt.PROXY_CAINFO] = cafile
        if settings.read_timeout:  # curl's nearest: fail when under 1 byte/s for that long (whole seconds)
            options[CurlOpt.LOW_SPEED_LIMIT] = 1
            options[CurlOpt.LOW_SPEED_TIME] = math.ceil(settings.read_timeout)
        target = _target(settings.impersonate)
        logger.debug("impersonate fetcher open: passing for %s", target)
        self._options: dict[str, Any] = {
            "impersonate": target,
            "max_clients": settings.concurrency,
            "timeout": settings.timeout,
            "verify": settings.verify_tls,
            "allow_redirects": False,
            "discard_cookies": not settings.cookies,
            "trust_env": False,  # as aiohttp: no proxy from the environment; a proxy is meta["proxy"]
        }
        # pages: a Content-Length over it is refused unread, a body stopped once it grows past it (decompressed)
        pages = {**options, CurlOpt.MAXFILESIZE_LARGE: settings.max_response_size}
        self._session = AsyncSession(**self._options, curl_options=pages)
        self._stream_options = options  # streamed bodies have their own bound, counted here (see _streams)

    def _streams(self) -> AsyncSession[Any]:
        """The session of the requests that stream their body (``meta["stream_to"]``), opened at the first:
        curl_cffi's streaming mode, each body bounded by its own request, the pages' cookie jar shared."""
        if self._streaming is None:
            from curl_cffi.requests import AsyncSession

            assert self._session is not None
            jar = self._session.cookies.jar  # one jar per crawl, whichever session a response came through
            self._streaming = AsyncSession(**self._options, cookies=jar, curl_options=self._stream_options)
        return self._streaming

    async def close(self) -> None:
        for session in (self._session, self._streaming):
            if session is not None:
                await session.close()  # ends the transfers still stopping too
        self._session = self._streaming = None
        await asyncio.gather(*self._stopping, return_exceptions=True)

    async def fetch(self, request: Request) -> Response:
        if self._session is None:
            raise RuntimeError("fetcher is not open")
        return await follow(request, self._send, self._allowed, self._settings.max_redirects, check=self._check)

    async def _send(self, request: Request, url: str, method: str, body: bytes, chain: Sequence[str]) -> Hop:
        """One hop: its status, headers, body (none for a redirect) and the ``Location`` to follow."""
        assert self._session is not None
        meta = request._meta  # not request.meta: that would give every request a dict
        proxy = await hop_proxy(request, url, chain)
        sent = self._headers(request)
        if sent:  # the request's own credentials: to its origin only (eclaw.security.scope)
            sent = dict(scoped(sent, self._sensitive, why_not_carried(request.url, chain, url), url))
        if self._auth:  # http_auth: bound to its scheme, host and port, as the plain fetcher sends it
            sent = dict(self._auth.added(sent or {}, url, chain))
        own_proxy_auth = proxy_authorization(request._headers, meta.get("proxy") if meta else None, proxy)
        timeout = meta.get("download_timeout") if meta else None  # this request's own, in all
        total = float(timeout) if timeout is not None else self._settings.timeout
        options = {
            "headers": sent,
            "data": body or None,
            "proxy": proxy or None,
            "proxy_auth": _basic(own_proxy_auth) if own_proxy_auth and "@" not in (proxy or "") else None,
            "quote": False,  # eclaw's URLs are escaped already
            "timeout": total,
        }
        sink: BodySink | None = meta.get(STREAM_TO) if meta else None
        try:
            if meta and sink is not None:
                limit = meta.get("max_response_size", self._settings.max_response_size)
                answer, data = await self._streamed(method, url, options, sink, limit)
            else:
                answer = await self._session.request(method, url, **options)  # type: ignore[arg-type]  # any method
                data = answer.content
        except self._errors as exc:
            raise _translated(exc, url, proxy, self._settings.max_response_size) from exc
        except TimeoutError:  # a streamed exchange past its timeout
            raise DownloadTimeout(f"timeout fetching {url}") from None
        request.meta["http_version"] = _HTTP_VERSIONS.get(answer.http_version, "")
        headers = CIMultiDictProxy(CIMultiDict((k, v or "") for k, v in answer.headers.multi_items()))
        location = headers.get("Location")
        if answer.status_code in REDIRECTS and location:
            return answer.status_code, headers, b"", location
        return answer.status_code, headers, data, None

    async def _streamed(
        self, method: str, url: str, options: dict[str, Any], sink: BodySink, limit: int
    ) -> tuple[CurlResponse, bytes]:
        """A request whose 2xx body goes to ``sink`` chunk by chunk (``b""`` returned for it), under
        ``limit``; other bodies are returned. Streamed, curl_cffi turns the timeout into a stall limit:
        the whole exchange is held to it here.

        Raises:
            TimeoutError: past the timeout (the transfer is stopped).
        """
        async with asyncio.timeout(options["timeout"]):
            sending = self._streams().request(method, url, stream=True, **options)  # type: ignore[arg-type]
            answer = await self._answer(sending)
            data = await self._read(answer, url, limit, sink if 200 <= answer.status_code < 300 else None)
        return answer, data

    async def _answer(self, sending: Awaitable[CurlResponse]) -> CurlResponse:
        """The response (its headers) to ``sending``; if the wait is given up (a timeout, a cancelled
        crawl), the transfer is stopped as soon as curl has its headers, in the background."""
        task = asyncio.ensure_future(sending)
        try:
            return await asyncio.shield(task)
        except BaseException:
            self._background(_dropped(task))
            raise

    async def _read(self, answer: CurlResponse, url: str, limit: int, sink: BodySink | None) -> bytes:
        """The body of ``answer`` (to ``sink`` if one is given: then ``b""``), at most ``limit`` bytes after
        decompression: a ``Content-Length`` over it is refused unread, a body stopped once it grows past it.

        Raises:
            ResponseTooLarge: over ``limit``; the transfer is stopped (so it is on any error or cancellation).
        """
        declared = answer.headers.get("Content-Length")
        chunks: list[bytes] = []
        size = 0
        try:
            if declared and declared.isdigit() and int(declared) > limit:
                raise ResponseTooLarge(f"{url}: Content-Length {declared} > max_response_size {limit}")
            if sink is not None:
                await sink.begin()
            async with aclosing(answer.aiter_content()) as body:  # type: ignore[no-untyped-call]  # curl_cffi's
                async for chunk in body:
                    size += len(chunk)
                    if size > limit:
                        raise ResponseTooLarge(f"{url}: body over max_response_size {limit}")
                    if sink is None:
                        chunks.append(chunk)
                    else:
                        await sink.write(chunk)
        except BaseException:
            self._background(_stopped(answer))
            raise
        return b"".join(chunks)

    def _background(self, stopping: Coroutine[Any, Any, None]) -> None:
        """Let a transfer given up end in the background: curl gives up at its next chunk (or at its stall
        limit) and hands its handle back to the session; :meth:`close` waits for what is left."""
        task = asyncio.ensure_future(stopping)
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    def _headers(self, request: Request) -> dict[str, str] | None:
        """The request's headers, less the stock browser UA (and its ``Accept`` headers) that would
        contradict the impersonated browser's (see the module)."""
        headers = request._headers
        if not headers or not self._stock:
            return headers
        agent = next((value for name, value in headers.items() if name.lower() == "user-agent"), None)
        stock = self._stock.get(agent) if agent is not None else None
        if stock is None:
            return headers
        accept, language = stock
        drop = {"user-agent": agent, "accept": accept, "accept-language": language}
        return {name: value for name, value in headers.items() if drop.get(name.lower()) != value}


async def _stopped(answer: CurlResponse) -> None:
    """Stop a transfer read no further, and wait for curl to hand its handle back."""
    if answer.quit_now is not None:
        answer.quit_now.set()  # curl's next chunk is refused: the transfer ends there
    with contextlib.suppress(Exception):  # the transfer's own end: curl's write error, now it was told to stop
        await answer.aclose()  # type: ignore[no-untyped-call]  # curl_cffi's, untyped


async def _dropped(sending: asyncio.Future[CurlResponse]) -> None:
    """Stop the transfer of a response no one waits for any more, once its headers are in."""
    try:
        answer = await sending
    except Exception:  # it failed on its own: nothing to stop
        return
    await _stopped(answer)


def _basic(header: str) -> tuple[str, str] | None:
    """The user and password of a ``Proxy-Authorization: Basic ...`` value, for curl to send the proxy
    itself (curl sends a request's own headers to the origin, through the tunnel); other schemes: none."""
    kind, _, token = header.partition(" ")
    if kind.lower() != "basic":
        return None
    try:
        user, _, password = base64.b64decode(token.strip(), validate=True).decode("latin-1").partition(":")
    except (binascii.Error, ValueError):
        return None
    return user, password


def _target(name: str) -> str:
    """The ``impersonate`` setting, checked against the browsers curl_cffi knows."""
    from curl_cffi.requests.impersonate import BrowserTypeLiteral

    known = typing.get_args(BrowserTypeLiteral)
    if name not in known:
        hint = difflib.get_close_matches(name, known, n=1)
        suffix = f" (did you mean {hint[0]!r}?)" if hint else " (e.g. 'chrome', 'firefox', 'safari', 'edge')"
        raise ConfigError(f"setting 'impersonate': curl_cffi cannot pass for {name!r}{suffix}")
    return name


def _translated(exc: RequestException, url: str, proxy: str | None, limit: int) -> DownloadError | InvalidURL:
    """curl's error for ``url`` as eclaw's (one ``reason`` per kind, as the plain fetcher names them)."""
    from curl_cffi.const import CurlECode as E

    code, detail = exc.code, _detail(exc)
    if code == E.FILESIZE_EXCEEDED:
        declared = _declared_length(exc)
        if declared is not None and declared > limit:
            return ResponseTooLarge(f"{url}: Content-Length {declared} > max_response_size {limit}")
        return ResponseTooLarge(f"{url}: body over max_response_size {limit}")
    if code == E.OPERATION_TIMEDOUT:
        return DownloadTimeout(f"timeout fetching {url}")
    if proxy and (
        code in (E.COULDNT_RESOLVE_PROXY, E.COULDNT_CONNECT, E.PROXY) or (code == E.RECV_ERROR and "CONNECT" in detail)
    ):
        return ProxyError(f"proxy {redact_url(proxy)} failed for {url}: {redact_url(detail)}")
    if code == E.PEER_FAILED_VERIFICATION:
        return certificate_error(url, _verify_failure(detail))
    if code == E.SSL_CONNECT_ERROR:
        reason = re.search(r"OPENSSL_internal:(\w+)", detail)  # BoringSSL's reason, e.g. WRONG_VERSION_NUMBER
        if reason:
            return handshake_error(url, reason.group(1))
        return ConnectError(f"cannot connect to {url}: {detail}")  # cut mid-handshake: worth another try
    if code in (E.COULDNT_RESOLVE_HOST, E.COULDNT_CONNECT):
        return ConnectError(f"cannot connect to {url}: {detail}")
    if code in (E.GOT_NOTHING, E.SEND_ERROR, E.RECV_ERROR, E.HTTP2, E.HTTP2_STREAM):
        return ConnectionLost(f"connection lost: {url}: {detail}")
    if code in (E.PARTIAL_FILE, E.BAD_CONTENT_ENCODING):
        return TruncatedResponse(f"bad or truncated body from {url}: {detail}")
    if code in (E.URL_MALFORMAT, E.UNSUPPORTED_PROTOCOL):
        return InvalidURL(f"malformed URL {url!r}")
    if code == E.WEIRD_SERVER_REPLY:
        return DownloadError(f"bad response from {url}: {detail}")
    return DownloadError(f"download of {url} failed: {detail}")


def _detail(exc: RequestException) -> str:
    """curl's own words, without curl_cffi's wrapping ("Failed to perform, curl: (7) ... See https://...")."""
    text = str(exc).strip()
    match = _CURL_MESSAGE.search(text)
    return (match.group(1) if match else text).splitlines()[0] if text else type(exc).__name__


def _verify_failure(detail: str) -> str:
    """Why a certificate did not verify, in OpenSSL 3's words (the plain fetcher's reasons)."""
    found = re.search(r"verify result: (.*?) \(\d+\)", detail)
    if found:
        return found.group(1)
    mismatch = re.search(r"matches? target (ipv[46] address|host ?name) '([^']*)'", detail, re.I)
    if mismatch:
        kind = "IP address" if mismatch.group(1).lower().startswith("ip") else "hostname"
        return f"{kind} mismatch, certificate is not valid for '{mismatch.group(2)}'"
    return detail


def _declared_length(exc: RequestException) -> int | None:
    """The Content-Length of the response curl refused, if it got that far."""
    answer = exc.response  # what curl had received: the headers at least
    length = answer.headers.get("Content-Length") if answer is not None else None
    return int(length) if length and length.isdigit() else None
