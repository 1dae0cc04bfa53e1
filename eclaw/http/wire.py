"""What went over the wire for one response: the request as sent, the response as received.

**Turning it on.** A fetcher keeps it only when asked, per request with ``meta["keep_received"] = True``,
or for every request of a crawl with the ``keep_received`` setting (an output that archives pages, such
as WARC, turns the setting on). Off, nothing is copied and ``response.received`` is ``None``.

**What it holds.** ``response.received`` is a :class:`Received` (frozen, slotted) of the final hop
(after redirects): ``version`` (``"1.1"``), ``status``, ``reason`` (as the server sent it), ``headers``
(the raw header list, in order with duplicates; names and values as ``str`` decoded from Latin-1, so
``.encode("latin-1")`` gives the bytes back), ``body`` (the bytes as received: still content-encoded,
de-chunked), ``date`` (UTC, when the headers came), ``ip`` (the server's address, when known) and
``request``, a :class:`Sent` (``method``, ``url``, ``headers`` as sent, ``body``), and ``redirects``,
the hops before it (each 3xx answer, or a page whose ``<meta http-equiv="refresh">`` was followed) kept
the same way, in order, each with an empty ``redirects``.
``response.body`` is the decoded body, as always.

**Decoding.** With it on, the plain fetcher reads the body undecoded and decodes it itself with
:class:`Decoder` (gzip, deflate, and br / zstd when aiohttp can decode them, the encodings aiohttp
offers in ``Accept-Encoding``), ``max_response_size`` bounding both the bytes received and the bytes
decoded: a gzip bomb is cut off after ``max_response_size`` decoded bytes, as with the setting off.
Only the plain fetcher keeps it: curl (impersonate) and the browser decode bodies themselves, so
their responses have ``received`` ``None``; so does a body streamed to a sink (``meta["stream_to"]``)
or read in part (``meta["max_body_bytes"]``: robots.txt).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from aiohttp.compression_utils import BrotliDecompressor, DecompressionBaseHandler, ZLibDecompressor, ZSTDDecompressor

from eclaw.exceptions import ResponseTooLarge, TruncatedResponse

__all__ = ["KEEP_RECEIVED", "Decoder", "Received", "Sent", "decoder_for"]

KEEP_RECEIVED = "keep_received"  # the request meta key (and the setting's name)

Headers = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Sent:
    """A request as it was sent (the final hop's: after redirects)."""

    method: str
    url: str
    headers: Headers
    body: bytes


@dataclass(frozen=True, slots=True)
class Received:
    """A response as it was received (see the module's docstring)."""

    version: str
    status: int
    reason: str
    headers: Headers
    body: bytes
    date: dt.datetime
    ip: str | None
    request: Sent
    redirects: tuple[Received, ...] = ()  # the hops before this one, in order (3xx, meta refreshes)


class Decoder:
    """Decodes a body of ``encoding`` chunk by chunk, refusing more than ``limit`` decoded bytes."""

    def __init__(self, encoding: str, limit: int, url: str) -> None:
        self._encoding = encoding
        self._handler: DecompressionBaseHandler | None = None  # made on the first byte: deflate sniffs it
        self._room = limit
        self._limit = limit
        self._url = url

    def feed(self, chunk: bytes) -> bytes:
        """The decoded bytes of ``chunk``.

        Raises:
            ResponseTooLarge: over ``limit`` decoded bytes in all.
            TruncatedResponse: bytes that do not decode.
        """
        if not chunk:
            return b""
        handler = self._handler
        if handler is None:
            handler = self._handler = _handler(self._encoding, chunk[0])
        parts, data = [], chunk
        while True:
            try:  # one byte past the room tells it is over
                out = handler.decompress_sync(data, self._room + 1)
            except Exception as exc:  # zlib.error, brotli.error...: each library has its own
                raise TruncatedResponse(f"bad body from {self._url}: cannot decode {self._encoding}") from exc
            data = b""
            self._room -= len(out)
            if self._room < 0:
                raise ResponseTooLarge(f"{self._url}: decoded body over max_response_size {self._limit}")
            if not out:
                break
            parts.append(out)
            if not handler.data_available:
                break
        return b"".join(parts)


def decoder_for(content_encoding: str | None, limit: int, url: str) -> Decoder | None:
    """A :class:`Decoder` for a ``Content-Encoding`` aiohttp decodes; ``None`` for none, identity or
    another (whose bytes are kept as they are, as aiohttp does)."""
    encoding = (content_encoding or "").strip().lower()
    if encoding not in ("gzip", "x-gzip", "deflate", "br", "zstd"):
        return None
    return Decoder(encoding, limit, url)


def _handler(encoding: str, first: int) -> DecompressionBaseHandler:
    """aiohttp's decoder of ``encoding``; a deflate body without its zlib header (RFC 1950: the first
    byte's low bits are 8) is read raw, as aiohttp and browsers read it."""
    if encoding == "br":
        return BrotliDecompressor()
    if encoding == "zstd":
        return ZSTDDecompressor()
    if encoding == "deflate":
        return ZLibDecompressor(encoding="deflate", suppress_deflate_header=first & 0xF != 8)
    return ZLibDecompressor(encoding="gzip")
