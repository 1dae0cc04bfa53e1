"""WARC/1.1 records of an exchange, built and serialised by warcio (each its own gzip member when
compressed, so that any record can be read, or the file cut, at its boundary).

Headers pass the crawl's :class:`~eclaw.security.redact.Redactor`: ``Authorization``, ``Cookie``,
``Set-Cookie`` and every sensitive header are written as ``***``; so do the target URI and the
request line (a secret the crawl knows, in a query string, is ``***``). Bodies are written as received,
cut at ``max_bytes`` (``WARC-Truncated: length``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from eclaw.archive.exchange import Exchange
from eclaw.security.redact import Redactor

__all__ = ["Original", "RecordWriter", "Written", "payload_digest"]

_GZIP_LEVEL = 6  # zlib.Z_DEFAULT_COMPRESSION


def payload_digest(body: bytes) -> str:
    """A payload's digest as WARC tools write and compare it: ``sha1:`` and the base32 of its SHA-1."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")


@dataclass(frozen=True, slots=True)
class Original:
    """The record a revisit refers to: an earlier response with the same payload."""

    record_id: str
    uri: str
    date: str  # its WARC-Date


@dataclass(frozen=True, slots=True)
class Written:
    """One record's bytes and what its index line needs."""

    data: bytes
    record_id: str
    kind: str  # WARC-Type
    uri: str
    date: str
    digest: str | None  # the payload digest (response and revisit records)
    mime: str
    status: str


class RecordWriter:
    """Serialises the records of exchanges: ``gzip`` makes each record one gzip member."""

    def __init__(self, redactor: Redactor, *, gzip: bool, max_bytes: int) -> None:
        self._redactor = redactor
        self._gzip = gzip
        self._max = max_bytes
        self._builder = WARCWriter(io.BytesIO(), gzip=gzip, warc_version="1.1")

    def warcinfo(self, filename: str, info: Mapping[str, str]) -> Written:
        record = self._builder.create_warcinfo_record(filename, dict(info))
        return self._written(record, "", None, "-", "-")

    def request(self, exchange: Exchange, concurrent_to: str) -> Written:
        """The request as sent, its sensitive headers redacted."""
        headers = self._redactor.headers_of(exchange.request_headers)
        if not any(name.lower() == "host" for name, _ in headers):
            headers.insert(0, ("Host", exchange.host))
        line = f"{exchange.method} {self._redactor.url(exchange.target)} HTTP/{exchange.version}"  # a secret in a query
        http = StatusAndHeaders(line, headers, is_http_request=True)  # the method is warcio's "protocol"
        fields = self._fields(exchange) | {"WARC-Concurrent-To": concurrent_to}
        record = self._builder.create_warc_record(
            self._uri(exchange),
            "request",
            payload=io.BytesIO(exchange.request_body),
            length=len(exchange.request_body),
            warc_headers_dict=fields,
            http_headers=http,
        )
        return self._written(record, self._uri(exchange), None, "-", "-")

    def response(self, exchange: Exchange, digest: str) -> Written:
        """The response as received (``digest``: :func:`payload_digest` of its body as kept)."""
        body, fields = exchange.body, self._fields(exchange)
        if len(body) > self._max:
            body, fields["WARC-Truncated"] = body[: self._max], "length"
        fields["WARC-Payload-Digest"] = digest
        record = self._builder.create_warc_record(
            self._uri(exchange),
            "response",
            payload=io.BytesIO(body),
            length=len(body),
            warc_headers_dict=fields,
            http_headers=self._http(exchange),
        )
        return self._written(record, self._uri(exchange), digest, _mime(exchange), str(exchange.status))

    def revisit(self, exchange: Exchange, digest: str, original: Original) -> Written:
        """An unchanged page: its headers as received, no body; it refers to ``original``."""
        fields = self._fields(exchange) | {"WARC-Refers-To": original.record_id}
        record = self._builder.create_revisit_record(
            self._uri(exchange), digest, original.uri, original.date, http_headers=self._http(exchange),
            warc_headers_dict=fields,
        )  # fmt: skip
        return self._written(record, self._uri(exchange), digest, "warc/revisit", "-")

    def body_kept(self, exchange: Exchange) -> bytes:
        """The part of the body a response record keeps (all of it, or its first ``max_bytes``)."""
        return exchange.body[: self._max]

    def _uri(self, exchange: Exchange) -> str:
        return self._redactor.url(exchange.url)

    def _http(self, exchange: Exchange) -> StatusAndHeaders:
        headers = self._redactor.headers_of(exchange.headers)
        status = f"{exchange.status} {exchange.reason}".rstrip()
        return StatusAndHeaders(status, headers, protocol=f"HTTP/{exchange.version}")

    def _fields(self, exchange: Exchange) -> dict[str, str]:
        fields = {"WARC-Date": datetime_to_iso_date(exchange.date.replace(tzinfo=None), use_micros=True)}
        if exchange.ip:
            fields["WARC-IP-Address"] = exchange.ip
        return fields

    def _written(self, record: ArcWarcRecord, uri: str, digest: str | None, mime: str, status: str) -> Written:
        out = io.BytesIO()
        WARCWriter(out, gzip=False, warc_version="1.1").write_record(record)
        data = out.getvalue()
        if self._gzip:  # a gzip member per record, at zlib's default level (warcio's 9 is slower, hardly smaller)
            packer = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, 31)
            data = packer.compress(data) + packer.flush()
        headers = record.rec_headers
        return Written(
            data=data,
            record_id=headers.get_header("WARC-Record-ID"),
            kind=headers.get_header("WARC-Type"),
            uri=uri,
            date=headers.get_header("WARC-Date"),
            digest=digest,
            mime=mime,
            status=status,
        )


def _mime(exchange: Exchange) -> str:
    for name, value in exchange.headers:
        if name.lower() == "content-type":
            return value.split(";", 1)[0].strip().lower() or "unk"
    return "unk"
