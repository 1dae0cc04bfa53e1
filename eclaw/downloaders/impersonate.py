"""The impersonating fetcher: a browser's TLS and HTTP/2 fingerprint, through curl_cffi.

The one place that talks to curl_cffi (``pip install 'eclaw[impersonate]'``), imported
when the fetcher opens, so eclaw imports without it. It behaves as the plain fetcher
does where users rely on it: redirects followed by eclaw hop by hop
(:mod:`eclaw.downloaders.redirects`); bodies refused past ``max_response_size`` as they
arrive (curl counts them after decompression, so a gzip bomb is cut off early); the
same timeouts, ``verify_tls``, cookies per crawl and ``meta["proxy"]`` (chosen again for each
redirect hop); the request's own credentials and ``http_auth`` on each hop as
:mod:`eclaw.security.scope` says (a ``Proxy-Authorization`` header goes to the proxy, never
through the tunnel); curl's errors become :mod:`eclaw.exceptions` here.

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

import base64
import binascii
import difflib
import logging
import math
import re
import ssl
import typing
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from multidict import CIMultiDict, CIMultiDictProxy

from eclaw.downloaders.redirects import REDIRECTS, Hop, follow, hop_proxy
from eclaw.downloaders.tls import certificate_error, handshake_error
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
from eclaw.http import Request, Response
from eclaw.http.urls import redact_url
from eclaw.security.headers import sensitive_headers
from eclaw.security.scope import proxy_authorization, scoped, why_not_carried
from eclaw.sessions.auth import HostAuth

if TYPE_CHECKING:
    from curl_cffi.requests import AsyncSession
    from curl_cffi.requests.exceptions import RequestException

    from eclaw.contracts import HopCheck
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["ImpersonateDownloader"]

logger = logging.getLogger(__name__)

INSTALL = "pip install 'eclaw[impersonate]'"
_HTTP_VERSIONS = {1: "HTTP/1.0", 2: "HTTP/1.1", 3: "HTTP/2", 30: "HTTP/3"}  # CURLINFO_HTTP_VERSION
_CURL_MESSAGE = re.compile(r"curl: \(\d+\) (.*?)(?:\. See https://curl\.se/\S*.*)?$", re.S)


class ImpersonateDownloader:
    """curl_cffi-based downloader passing for the browser of the ``impersonate`` setting: one
    ``AsyncSession`` (connections, HTTP/2 streams and cookies) per crawl."""

    def __init__(self) -> None:
        self._session: AsyncSession[Any] | None = None
        self._check: HopCheck | None = None

    def check_hops(self, check: HopCheck) -> None:
        """Have ``check`` vet each redirect hop (:class:`~eclaw.downloaders.base.VetsHops`)."""
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
        options: dict[CurlOpt, int | str] = {
            CurlOpt.CONNECTTIMEOUT_MS: math.ceil(settings.connect_timeout * 1000),
            # a Content-Length over it is refused unread, a body stopped once it grows past it (decompressed)
            CurlOpt.MAXFILESIZE_LARGE: settings.max_response_size,
        }
        cafile = ssl.get_default_verify_paths().cafile  # Python's (the system's, or SSL_CERT_FILE), as plain's
        if settings.verify_tls and cafile:
            options[CurlOpt.CAINFO] = options[CurlOpt.PROXY_CAINFO] = cafile
        if settings.read_timeout:  # curl's nearest: fail when under 1 byte/s for that long (whole seconds)
            options[CurlOpt.LOW_SPEED_LIMIT] = 1
            options[CurlOpt.LOW_SPEED_TIME] = math.ceil(settings.read_timeout)
        target = _target(settings.impersonate)
        logger.debug("impersonate fetcher open: passing for %s", target)
        self._session = AsyncSession(
            impersonate=target,
            max_clients=settings.concurrency,
            timeout=settings.timeout,
            verify=settings.verify_tls,
            allow_redirects=False,
            discard_cookies=not settings.cookies,
            trust_env=False,  # as aiohttp: no proxy from the environment; a proxy is meta["proxy"]
            curl_options=options,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch(self, request: Request) -> Response:
        if self._session is None:
            raise RuntimeError("downloader is not open")
        return await follow(request, self._send, self._allowed, self._settings.max_redirects, check=self._check)

    async def _send(self, request: Request, url: str, method: str, body: bytes, chain: Sequence[str]) -> Hop:
        """One hop: its status, headers, body (none for a redirect) and the ``Location`` to follow."""
        assert self._session is not None
        meta = request._meta  # not request.meta: that would give every request a dict
        proxy = await hop_proxy(request, url, chain)
        timeout = meta.get("download_timeout") if meta else None  # this request's own, in all
        sent = self._headers(request)
        if sent:  # the request's own credentials: to its origin only (eclaw.security.scope)
            sent = dict(scoped(sent, self._sensitive, why_not_carried(request.url, chain, url), url))
        if self._auth:  # http_auth: bound to its scheme, host and port, as the plain fetcher sends it
            sent = dict(self._auth.added(sent or {}, url, chain))
        own_proxy_auth = proxy_authorization(request._headers, meta.get("proxy") if meta else None, proxy)
        try:
            answer = await self._session.request(
                method,  # type: ignore[arg-type]  # any method eclaw was given
                url,
                headers=sent,
                data=body or None,
                proxy=proxy or None,
                proxy_auth=_basic(own_proxy_auth) if own_proxy_auth and "@" not in (proxy or "") else None,
                quote=False,  # eclaw's URLs are escaped already
                timeout=float(timeout) if timeout is not None else self._settings.timeout,
            )
        except self._errors as exc:
            raise _translated(exc, url, proxy, self._settings.max_response_size) from exc
        request.meta["http_version"] = _HTTP_VERSIONS.get(answer.http_version, "")
        headers = CIMultiDictProxy(CIMultiDict(answer.headers.multi_items()))
        location = headers.get("Location")
        if answer.status_code in REDIRECTS and location:
            return answer.status_code, headers, b"", location
        return answer.status_code, headers, answer.content, None

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
