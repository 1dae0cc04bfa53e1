"""One HTTP exchange as a web archive keeps it: the request as sent, the response as received.

The WARC output asks fetchers to keep what went over the wire (``meta["keep_received"]``): the
plain fetcher then hands it over on ``response.received`` (:mod:`eclaw.http.wire`), the final
hop's request and response, the body still content-encoded, and the redirect hops before it
(:func:`hops_of`). A response without it (a fetcher that cannot keep it: a browser renders the
page; a response a middleware made) is archived as it stands, with no hop: its body decoded,
so the headers that described the bytes on the wire and no longer describe that body
(``Content-Encoding``, ``Transfer-Encoding``, ``Content-Length``) are kept under ``X-Archive-Orig-*``
names, as replay tools show original headers, and ``Content-Length`` is set to the body's length.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import urlsplit

from eclaw.http import Response
from eclaw.http.wire import Received

__all__ = ["Exchange", "exchange_of", "hops_of"]

_REWRITTEN = frozenset({"content-encoding", "transfer-encoding", "content-length"})


@dataclass(frozen=True, slots=True)
class Exchange:
    """A request as sent and its response as received (header lists keep order and duplicates)."""

    url: str
    method: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    version: str  # the response's HTTP version: "1.1"
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes  # as received: still content-encoded when the fetcher kept the wire's bytes
    date: dt.datetime  # when the response came (UTC)
    ip: str | None = None  # the server's address, when the fetcher knows it

    @property
    def target(self) -> str:
        """The request line's target: the URL's path and query (origin form)."""
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc.rpartition("@")[2]


def exchange_of(response: Response) -> Exchange:
    """What ``response`` came from and was: as on the wire if the fetcher kept it, else as the
    response stands (see the module's docstring)."""
    received = response.received
    if received is not None:
        return _kept(received, response.url)  # the URL sent, without its fragment
    request = response.request
    headers = [(f"X-Archive-Orig-{k}" if k.lower() in _REWRITTEN else k, v) for k, v in response.headers.items()]
    headers.append(("Content-Length", str(len(response.body))))
    return Exchange(
        url=response.url,
        method=request.method,
        request_headers=list(request.headers.items()),
        request_body=request.body,
        version="1.1",
        status=response.status,
        reason=_reason(response.status),
        headers=headers,
        body=response.body,
        date=dt.datetime.now(dt.UTC),
    )


def hops_of(response: Response) -> list[Exchange]:
    """The redirect hops before ``response`` (each ``3xx`` answer, or a page whose meta refresh was
    followed), in order, as on the wire; none unless the fetcher kept the exchange."""
    received = response.received
    if received is None:
        return []
    return [_kept(hop, hop.request.url) for hop in received.redirects]


def _kept(received: Received, url: str) -> Exchange:
    sent = received.request
    return Exchange(
        url=url,
        method=sent.method,
        request_headers=list(sent.headers),
        request_body=sent.body,
        version=received.version,
        status=received.status,
        reason=received.reason,
        headers=list(received.headers),
        body=received.body,
        date=received.date,
        ip=received.ip,
    )


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
