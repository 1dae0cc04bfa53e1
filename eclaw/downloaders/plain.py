"""The HTTP downloader: the one place that talks to aiohttp's client.

Redirects are followed by eclaw, hop by hop (:mod:`eclaw.downloaders.redirects`),
so loops, hop limits and offsite hops are caught; bodies are streamed and refused
past ``max_response_size`` (counted after decompression, so a gzip bomb is cut off
early); aiohttp's exceptions are translated into :mod:`eclaw.exceptions`.
"""

from __future__ import annotations

import base64
import logging
import ssl
from typing import TYPE_CHECKING

import aiohttp
from yarl import URL

from eclaw.downloaders.redirects import REDIRECTS, Hop, follow
from eclaw.downloaders.tls import certificate_error, handshake_error
from eclaw.exceptions import (
    BadRequest,
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

if TYPE_CHECKING:
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["HttpDownloader"]

logger = logging.getLogger(__name__)

FALLBACK_USER_AGENT = "eclaw/0.1 (+https://pypi.org/project/eclaw/)"  # when no middleware sets one


class HttpDownloader:
    """aiohttp-based downloader: one ``ClientSession`` per crawl."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self.bytes_received = 0

    async def open(self, spider: Spider, settings: Settings) -> None:
        self._settings = settings
        self._allowed = frozenset(d.lower() for d in spider.allowed_domains)
        connector = aiohttp.TCPConnector(
            limit=settings.concurrency,
            limit_per_host=settings.concurrency_per_domain,
            ttl_dns_cache=300,
            ssl=settings.verify_tls,
        )
        jar: aiohttp.abc.AbstractCookieJar = (
            aiohttp.CookieJar(unsafe=True) if settings.cookies else aiohttp.DummyCookieJar()
        )
        self._timeout = aiohttp.ClientTimeout(
            total=settings.timeout,
            sock_connect=settings.connect_timeout,
            sock_read=settings.read_timeout or None,  # each chunk restarts a timer: off unless asked for
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=jar,
            timeout=self._timeout,
            headers={"User-Agent": settings.user_agent or FALLBACK_USER_AGENT},
            auto_decompress=True,
            raise_for_status=False,
            max_line_size=16384,
            max_field_size=16384,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch(self, request: Request) -> Response:
        if self._session is None:
            raise RuntimeError("downloader is not open")
        return await follow(request, self._fetch_once, self._allowed, self._settings.max_redirects)

    async def _fetch_once(self, request: Request, url: str, method: str, body: bytes) -> Hop:
        assert self._session is not None
        proxy, proxy_headers = _proxy(request)
        headers = request.headers
        if proxy_headers and url.startswith("http:"):  # plain HTTP goes to the proxy as is: no CONNECT
            headers = {**headers, **proxy_headers}
        try:
            async with self._session.request(
                method,
                url,
                headers=headers,
                data=body or None,
                allow_redirects=False,
                proxy=proxy,
                proxy_headers=proxy_headers,
            ) as resp:
                location = resp.headers.get("Location")
                if resp.status in REDIRECTS and location:
                    return resp.status, resp.headers, b"", location
                data = await self._read_body(resp, url)
                return resp.status, resp.headers, data, None
        except DownloadError:
            raise
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise DownloadTimeout(f"timeout fetching {url}") from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise ConnectionLost(f"server disconnected: {url}") from exc
        except aiohttp.ClientPayloadError as exc:
            raise TruncatedResponse(f"bad or truncated body from {url}: {_short(exc)}") from exc
        except (aiohttp.ClientProxyConnectionError, aiohttp.ClientHttpProxyError) as exc:
            raise ProxyError(f"proxy {_redacted(proxy)} failed for {url}: {_short(exc)}") from exc
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

    async def _read_body(self, resp: aiohttp.ClientResponse, url: str) -> bytes:
        limit = self._settings.max_response_size
        declared = resp.content_length
        if declared is not None and declared > limit:
            raise ResponseTooLarge(f"{url}: Content-Length {declared} > max_response_size {limit}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
            if size > limit:
                raise ResponseTooLarge(f"{url}: body over max_response_size {limit}")
            chunks.append(chunk)
        self.bytes_received += size
        return b"".join(chunks)


def _tls_error(url: str, exc: aiohttp.ClientSSLError) -> DownloadError:
    """A failed TLS handshake: a certificate that does not verify or a protocol mismatch fails at
    once, with its own reason; a connection cut mid-handshake is a connect error (retried)."""
    cause = exc.os_error
    if isinstance(cause, ssl.SSLCertVerificationError):
        return certificate_error(url, cause.verify_message or cause.reason or _short(cause))
    if not isinstance(cause, ssl.SSLError) or isinstance(cause, ssl.SSLEOFError | ssl.SSLSyscallError):
        return ConnectError(f"cannot connect to {url}: {_short(exc)}")
    return handshake_error(url, cause.reason or "handshake failed")


def _proxy(request: Request) -> tuple[str | None, dict[str, str] | None]:
    """The proxy of ``request.meta["proxy"]``, its credentials moved into a ``Proxy-Authorization`` header."""
    meta = request._meta  # not request.meta: that would give every request a dict
    proxy = meta.get("proxy") if meta else None
    if not proxy:
        return None, None
    parsed = URL(proxy)
    if parsed.user is None:
        return proxy, None
    token = base64.b64encode(f"{parsed.user}:{parsed.password or ''}".encode()).decode("ascii")
    return str(parsed.with_user(None)), {"Proxy-Authorization": f"Basic {token}"}


def _redacted(proxy: str | None) -> str:
    return str(URL(proxy).with_user(None)) if proxy else "-"


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
