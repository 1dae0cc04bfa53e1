"""Playwright's errors in eclaw's exception tree: the one place that reads them.

Chromium names a failed navigation with a ``net::ERR_...`` code in the message; a step that
waited too long raises Playwright's ``TimeoutError``; a page, context or browser that went
away says it "has been closed" (or "crashed").
"""

from __future__ import annotations

import logging

from eclaw.exceptions import (
    ConnectError,
    ConnectionLost,
    DownloadError,
    DownloadTimeout,
    ProxyError,
    TLSCertificateError,
    TLSError,
    TooManyRedirects,
    TruncatedResponse,
)

__all__ = ["translate"]

logger = logging.getLogger(__name__)

# net::ERR_ codes, first match wins; any other net::ERR_ is a connect error (refused, unresolved...)
_CODES: tuple[tuple[str, type[DownloadError]], ...] = (
    ("ERR_PROXY", ProxyError),
    ("ERR_TUNNEL_CONNECTION_FAILED", ProxyError),
    ("ERR_CERT_", TLSCertificateError),
    ("ERR_SSL_", TLSError),
    ("ERR_BAD_SSL", TLSError),
    ("ERR_TIMED_OUT", DownloadTimeout),
    ("ERR_CONNECTION_TIMED_OUT", DownloadTimeout),
    ("ERR_CONNECTION_RESET", ConnectionLost),
    ("ERR_CONNECTION_CLOSED", ConnectionLost),
    ("ERR_EMPTY_RESPONSE", ConnectionLost),
    ("ERR_CONTENT_LENGTH_MISMATCH", TruncatedResponse),
    ("ERR_INCOMPLETE_CHUNKED_ENCODING", TruncatedResponse),
    ("ERR_TOO_MANY_REDIRECTS", TooManyRedirects),
    ("ERR_ABORTED", DownloadError),  # a download (not a page), or a navigation the page cancelled
    ("ERR_BLOCKED", DownloadError),
    ("ERR_UNSAFE_PORT", DownloadError),  # a port Chromium never fetches (25, 110...): no retry helps
)
_GONE = ("has been closed", "Target crashed", "Browser closed", "Connection closed")


def translate(exc: Exception, url: str, doing: str, timeout: float) -> DownloadError | None:
    """The eclaw error for ``exc`` raised while ``doing`` (navigation, a step) on ``url``;
    ``None`` when ``exc`` is no browser error (it goes on as it is)."""
    from playwright.async_api import Error
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    if isinstance(exc, TimeoutError | PlaywrightTimeout):
        return DownloadTimeout(f"timeout rendering {url}: {doing} not done within {timeout:g}s")
    if not isinstance(exc, Error):
        return None
    message = _first_line(exc.message)
    code = message.partition("net::")[2].split(" ", 1)[0]
    if code:
        for prefix, kind in _CODES:
            if code.startswith(prefix):
                return _error(kind, f"{code} rendering {url} ({doing})", code)
        return ConnectError(f"cannot connect to {url}: {code}")
    if any(sign in message for sign in _GONE):
        return ConnectionLost(f"the browser lost the page {url} ({doing}): {message}")
    return DownloadError(f"browser failed on {url} ({doing}): {message}")


def _error(kind: type[DownloadError], message: str, code: str) -> DownloadError:
    if issubclass(kind, TLSError):  # a reason per kind, as the plain fetcher gives
        what = code.removeprefix("ERR_").removeprefix("CERT_").lower().replace("_", " ")
        prefix = "tls: certificate verify failed: " if kind is TLSCertificateError else "tls: "
        return kind(message, reason=prefix + what)
    return kind(message)


def _first_line(message: str) -> str:
    """Playwright appends a call log after the first line; the method name goes too."""
    first = message.strip().splitlines()[0] if message.strip() else "error"
    head, sep, rest = first.partition(": ")
    return rest if sep and "." in head and " " not in head else first
