"""Eclaw's one exception tree.

Errors::

    EclawError
    ├── ConfigError (ValueError)        bad setting, bad spider, bad CLI input
    │   ├── SpiderLoadError             spider file missing, broken, or spider-less
    │   └── FlowError                   a flow that cannot run as defined (a cycle, an unknown dependency)
    ├── InvalidURL (ValueError)         a URL eclaw cannot fetch
    ├── NotTextResponse (TypeError)     selectors used on a binary response (PDF, image, archive...)
    ├── SitemapError (ValueError)       a sitemap that cannot be read (not XML, not a sitemap, bad gzip, too large)
    ├── NotSerialisable (ValueError)    a request that cannot be saved as JSON (a lambda callback...)
    ├── RedisLost                       Redis unreachable for longer than ``lease_timeout``: the worker pauses
    ├── TaskFailed                      a flow task's own way to fail with a message
    └── DownloadError                   one download went wrong
        ├── ConnectError (ConnectionError)
        │   ├── ConnectionLost          the peer reset or closed mid-response
        │   └── ProxyError              the proxy refused, failed or banned the request
        ├── TLSError (ConnectionError)  the TLS handshake failed (wrong version...): not retried
        │   └── TLSCertificateError     the certificate does not verify (``verify_tls=False`` skips the check)
        ├── DownloadTimeout (TimeoutError)
        ├── TruncatedResponse           body shorter than announced / bad encoding
        ├── ResponseTooLarge            refused past ``max_response_size``
        ├── BadRequest                  the request cannot be sent as built (conflicting auth, bad header)
        ├── CacheMiss                   ``HttpCache(offline=True)`` has no copy
        ├── Banned                      the site banned every session the pool tried (``Sessions``)
        ├── RedirectError
        │   ├── TooManyRedirects
        │   ├── RedirectLoop
        │   └── UnsupportedRedirect     redirect to a non-http(s) URL
        └── HttpError                   status the spider did not ask to handle

Control flow (not errors; raise them to steer a crawl)::

    IgnoreRequest(reason)   drop a request: it ends as ``RequestDropped(reason)``
    DropItem(reason)        drop an item in a pipeline: ``ItemDropped(reason)``
    CloseSpider(reason)     stop the crawl gracefully from a callback
    RetryRequest(...)       a middleware asks for another attempt after a delay

aiohttp errors are translated into this tree in :mod:`eclaw.fetchers.plain`,
the one place that talks to aiohttp's client; curl's in :mod:`eclaw.fetchers.impersonate`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BadRequest",
    "Banned",
    "CacheMiss",
    "CloseSpider",
    "ConfigError",
    "ConnectError",
    "ConnectionLost",
    "DownloadError",
    "DownloadTimeout",
    "DropItem",
    "EclawError",
    "FlowError",
    "HttpError",
    "IgnoreRequest",
    "InvalidURL",
    "NotSerialisable",
    "NotTextResponse",
    "ProxyError",
    "RedirectError",
    "RedirectLoop",
    "RedisLost",
    "ResponseTooLarge",
    "RetryRequest",
    "SitemapError",
    "SpiderLoadError",
    "TLSCertificateError",
    "TLSError",
    "TaskFailed",
    "TooManyRedirects",
    "TruncatedResponse",
    "UnsupportedRedirect",
]


class EclawError(Exception):
    """Base of every error eclaw raises."""


class ConfigError(EclawError, ValueError):
    """A setting, spider definition or command-line argument is invalid."""


class SpiderLoadError(ConfigError):
    """A spider file could not be loaded, or holds no (or no such) spider."""


class FlowError(ConfigError):
    """The flow cannot run as defined: a cycle, an unknown or self dependency, a duplicate name."""


class NotSerialisable(EclawError, ValueError):
    """The request holds something that cannot be written as JSON (a lambda callback, an object in meta)."""


class RedisLost(EclawError):
    """Redis stayed unreachable longer than ``lease_timeout``: the crawl pauses (its frontier is safe in Redis)."""


class TaskFailed(EclawError):
    """A flow task's own way to fail with a message (no traceback needed)."""


class InvalidURL(EclawError, ValueError):
    """A URL is malformed or not absolute."""


class NotTextResponse(EclawError, TypeError):
    """A markup parser (``css``, ``xpath``, ``soup``, ``follow_all(css=...)``) was asked of a
    response that is not text: a PDF, an image, an archive, an octet stream. ``reason``
    names the content type (a callback that does this fails with it)."""

    def __init__(self, url: str, content_type: str) -> None:
        super().__init__(
            f"{url} is not text ({content_type}): selectors need an HTML or XML page; its bytes are in response.body"
        )
        self.reason = f"not text ({content_type})"


class SitemapError(EclawError, ValueError):
    """A sitemap document could not be read; the request for it fails with ``reason``
    (``bad sitemap: not XML``, ``... not a sitemap``, ``... bad gzip``, ``... too large``)."""

    def __init__(self, kind: str, detail: str, url: str = "") -> None:
        super().__init__(f"bad sitemap{' ' + url if url else ''}: {kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.reason = f"bad sitemap: {kind}"


class DownloadError(EclawError):
    """A download failed. ``reason`` is a short, stable label for stats."""

    reason = "download error"


class ConnectError(DownloadError, ConnectionError):
    """The connection could not be made (DNS, refused, reset, proxy); worth another try."""

    reason = "connect error"


class DnsError(DownloadError):
    """The host name did not resolve (NXDOMAIN, no address, or the DNS server failed after
    ``dns_retries`` tries). Not a :class:`ConnectError`: ``Retry`` does not retry it."""

    reason = "dns"


class ConnectionLost(ConnectError):
    """The server closed or reset the connection before the response ended."""

    reason = "connection lost"


class ProxyError(ConnectError):
    """The proxy could not be reached, refused the request (407) or looks banned."""

    reason = "proxy error"


class TLSError(DownloadError, ConnectionError):
    """The TLS handshake failed for a reason the next attempt would meet again (a protocol or
    version mismatch): not a :class:`ConnectError`, so ``Retry`` does not retry it. ``reason``
    names it, e.g. ``tls: wrong version number``."""

    reason = "tls error"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class TLSCertificateError(TLSError):
    """The server's certificate does not verify (self-signed, expired, unknown issuer, another
    host's); ``reason`` says why, e.g. ``tls: certificate verify failed: self-signed certificate``.
    ``verify_tls=False`` turns the check off."""

    reason = "tls: certificate verify failed"


class BadRequest(DownloadError):
    """The request cannot be sent as it is (aiohttp refused to build it)."""

    reason = "bad request"


class CacheMiss(DownloadError):
    """An offline ``HttpCache`` has no stored response for the request."""

    reason = "cache miss"


class Banned(DownloadError):
    """The response is a ban (a status or a page the session pool was told to watch for), and
    the request has been tried on as many fresh sessions as it may."""

    reason = "banned"


class DownloadTimeout(DownloadError, TimeoutError):
    """Connect, read or total timeout elapsed."""

    reason = "timeout"


class TruncatedResponse(DownloadError):
    """The body ended early or could not be decoded (bad gzip, short body)."""

    reason = "truncated response"


class ResponseTooLarge(DownloadError):
    """The (decompressed) body exceeded ``max_response_size``; it was not kept."""

    reason = "too large"


class RedirectError(DownloadError):
    """A redirect could not be followed."""

    reason = "redirect error"


class TooManyRedirects(RedirectError):
    reason = "too many redirects"


class RedirectLoop(RedirectError):
    reason = "redirect loop"


class UnsupportedRedirect(RedirectError):
    reason = "redirect to unsupported scheme"


class HttpError(DownloadError):
    """The response status is one the spider does not handle (404, 500, ...)."""

    def __init__(self, response: Any) -> None:  # an eclaw Response (this module imports nothing of eclaw's)
        super().__init__(f"HTTP {response.status} for {response.url}")
        self.response = response
        self.status = response.status
        self.reason = f"http {response.status}"


class IgnoreRequest(Exception):
    """Control flow: drop this request; it ends as ``RequestDropped(reason)``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DropItem(Exception):
    """Control flow: a pipeline drops an item; it ends as ``ItemDropped(reason)``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CloseSpider(Exception):
    """Control flow: raised from a callback, stops the crawl gracefully."""

    def __init__(self, reason: str = "closespider") -> None:
        super().__init__(reason)
        self.reason = reason


class RetryRequest(Exception):
    """Control flow: this attempt failed; download ``request`` again after ``delay`` seconds.

    The crawl emits ``RequestFailed(final=False, attempt=...)`` for the failed
    attempt, frees the download slot, and hands ``request`` back to the
    frontier when the delay is over. ``error`` is what went wrong.
    """

    def __init__(self, request: Any, *, delay: float, reason: str, error: BaseException | None = None) -> None:
        # ``request``: the eclaw Request to send again
        super().__init__(f"retry {request.url} in {delay:.2f}s ({reason})")
        self.request = request
        self.delay = delay
        self.reason = reason
        self.error = error
