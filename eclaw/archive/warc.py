"""The WARC output: ``-o crawl.warc.gz`` (or ``.warc``) archives every page the crawl fetched.

The archive opens with a ``warcinfo`` record; each page then gets a ``response`` record (its
bytes as received, :mod:`eclaw.archive.exchange`) and the ``request`` record of what was sent,
linked by ``WARC-Concurrent-To``, after the same two records for each redirect hop that led to it
(the ``3xx`` answer with its ``Location``), so that replay follows the redirect. A page whose
payload an earlier archive of the same spider and run key already holds
(:mod:`eclaw.archive.digests`) is written as a ``revisit`` record instead.
``crawl.cdxj``, pywb's index of the archive, is written beside it at the end (:mod:`eclaw.archive.cdxj`).

A page is archived when its request ends: parsed (``ResponseParsed``), or failed for good after
it was downloaded (its callback raised) or on an HTTP status (a 404's answer is archived too).

Exactly-once under ``--state``: a checkpoint saves the archive's length, a resumed crawl cuts it
back there (records are whole gzip members, so the cut falls between two) and fetches again what
had not ended by then. A failure's record is written before its end is recorded, and a checkpoint
may fall in between (its snapshot, its errback): a page fetched again on resume that the archive
already holds from before the checkpoint is not written twice.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from eclaw.archive.cdxj import cdxj_line, index_path, sort_index
from eclaw.archive.digests import INDEX_NAME, DigestIndex
from eclaw.archive.exchange import exchange_of, hops_of
from eclaw.archive.records import Original, RecordWriter, Written, payload_digest
from eclaw.events import RequestFailed, RequestScheduled, ResponseDownloaded, ResponseParsed
from eclaw.exceptions import ConfigError, HttpError
from eclaw.http import Response
from eclaw.http.wire import KEEP_RECEIVED
from eclaw.storage.paths import resolve_path

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext, Handler
    from eclaw.spider import Spider

__all__ = ["WarcOutput"]

logger = logging.getLogger(__name__)
_COMMIT_EVERY = 64  # digests learnt between two commits of the index (a checkpoint commits too)


class WarcOutput:
    """Writes the crawl's pages to a WARC/1.1 file, its CDXJ index at the end.

    Args:
        path: the archive's path; ``.warc.gz`` compresses each record as its own gzip member.
            It may hold ``{spider}``, ``{run_key}`` and ``{date}``.
        run_key: the run key (``{run_key}``, and which earlier archives a revisit may refer to).
    """

    def __init__(self, path: str | Path, *, run_key: str = "default") -> None:
        self.template = str(path)
        self.run_key = run_key
        if not self.template.endswith((".warc", ".warc.gz")):
            raise ConfigError(f"{path}: a web archive's name ends in .warc or .warc.gz")
        self.path = resolve_path(self.template, "spider", run_key)
        self.records = 0  # records written (warcinfo included)
        self._fd: int | None = None
        self._size = 0
        self._spool: BinaryIO | None = None  # the index's lines, unsorted (cdxj.py)
        self._resume: dict[str, Any] | None = None
        self._writer: RecordWriter | None = None
        self._digests: DigestIndex | None = None
        self._uncommitted = 0
        self._crawl: CrawlContext | None = None
        self._resumed_at: int | None = None  # where a resumed archive was cut back to
        self._pending: dict[int, Response] = {}  # downloaded pages whose requests have not ended, by request

    def __repr__(self) -> str:
        return f"WarcOutput({self.template!r})"

    def check(self, spider: str) -> None:
        """Fail before any download if spider ``spider``'s archive cannot be written."""
        path = resolve_path(self.template, spider, self.run_key)
        if not path.parent.is_dir():
            raise ConfigError(f"output directory does not exist: {path.parent} (for {path})")
        if path.is_dir():
            raise ConfigError(f"output path is a directory: {path}")

    def subscriptions(self) -> list[tuple[type[Any], Handler]]:
        """Each request asks its fetcher to keep the exchange as on the wire; a page is archived when
        its request ends (plain handlers: written before the request is marked done, with no
        checkpoint in between); a downloaded page waits for that end here."""
        return [
            (RequestScheduled, self._scheduled),
            (ResponseDownloaded, self._downloaded),
            (ResponseParsed, self._parsed),
            (RequestFailed, self._failed),
        ]

    # -- lifecycle ----------------------------------------------------------------------

    async def open(self, crawl: CrawlContext) -> None:
        spider, settings = crawl.spider.name, crawl.settings
        self._crawl = crawl
        self.path = path = resolve_path(self.template, spider, self.run_key)
        self.check(spider)
        gzip, most = path.name.endswith(".gz"), settings.max_response_size
        self._writer = RecordWriter(crawl.redactor, gzip=gzip, max_bytes=most)
        self._digests = DigestIndex(path.parent / INDEX_NAME, spider, self.run_key)
        spool = _spool_path(path)
        if self._resume is None:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            self._size = 0
            self._digests.cut(path, 0)  # what an old archive of this name held is gone
            index_path(path).unlink(missing_ok=True)
            self._spool = spool.open("wb")
            self._write([self._writer.warcinfo(path.name, _info(crawl))])
        else:
            self._reopen(self._resume, spool)

    def _reopen(self, saved: dict[str, Any], spool: Path) -> None:
        path, offset = Path(saved["path"]), int(saved["offset"])
        size = path.stat().st_size if path.exists() else -1
        if size < offset:
            raise ConfigError(
                f"web archive {path} is shorter than the saved crawl wrote ({max(size, 0)} < {offset} bytes):"
                " it was changed; remove the state directory to start over"
            )
        self.path, self._size, self.records = path, offset, int(saved["records"])
        self._resumed_at = offset
        self._fd = os.open(path, os.O_WRONLY)
        os.ftruncate(self._fd, offset)  # the pages after the checkpoint are fetched and written again
        os.lseek(self._fd, offset, os.SEEK_SET)
        assert self._digests is not None
        self._digests.cut(path, offset)
        self._spool = _cut_spool(spool, index_path(path), offset)

    def checkpoint(self) -> dict[str, Any]:
        """Where the archive stands, for a saved crawl (the index's pages and digests kept up to it)."""
        if self._spool is not None:
            self._spool.flush()
        if self._digests is not None:
            self._digests.commit()
            self._uncommitted = 0
        return {"path": str(self.path), "offset": self._size, "records": self.records}

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue a saved crawl's archive from its checkpoint when opened."""
        self._resume = saved

    async def flush(self) -> None:
        """Before a checkpoint: the index lines and digests learnt so far are kept."""
        if self._spool is not None:
            self._spool.flush()
        if self._digests is not None:
            self._digests.commit()
            self._uncommitted = 0

    async def close(self) -> None:
        """Close the archive; sort its index into ``crawl.cdxj``."""
        if self._fd is None:
            return
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = None
        if self._spool is not None:
            self._spool.close()
        spool = _spool_path(self.path)
        sort_index(spool, index_path(self.path))
        spool.unlink()
        if self._digests is not None:
            self._digests.close()
        logger.info("web archive %s: %d records, index %s", self.path, self.records, index_path(self.path))

    async def process_item(self, item: Any, spider: Spider) -> Any:
        """Items pass by untouched: the archive holds pages."""
        return item

    # -- the pages ----------------------------------------------------------------------

    def _scheduled(self, event: RequestScheduled) -> None:
        event.request.meta.setdefault(KEEP_RECEIVED, True)  # unless the request says otherwise

    def _downloaded(self, event: ResponseDownloaded) -> None:
        self._pending[id(event.response.request)] = event.response  # its request is the one its end names

    def _parsed(self, event: ResponseParsed) -> None:
        self._pending.pop(id(event.request), None)
        self.archive(event.response)

    def _failed(self, event: RequestFailed) -> None:
        """A final failure on a downloaded page (a callback error, no items) or on an HTTP status."""
        response = self._pending.pop(id(event.request), None)
        if response is None and isinstance(event.error, HttpError):
            response = event.error.response
        if event.final and response is not None:
            self.archive(response)

    def archive(self, response: Response) -> None:
        """Write ``response``'s records: a response (or a revisit) and its request."""
        if response.from_cache or self._fd is None:
            return
        writer, digests = self._writer, self._digests
        assert writer is not None and digests is not None
        exchange = exchange_of(response)
        digest = payload_digest(writer.body_kept(exchange))
        uri = self._uri(exchange.url)
        if self._resumed_at is not None and digests.holds(self.path, uri, self._resumed_at):
            return  # archived before the checkpoint, its request's end after it: fetched again on resume
        original = digests.find(uri, digest)
        main = writer.revisit(exchange, digest, original) if original else writer.response(exchange, digest)
        hops = self._hops(response)
        at = self._size + sum(len(record.data) for record in hops)
        self._write([*hops, main, writer.request(exchange, main.record_id)])  # in one write: all or none
        digests.archived(self.path, uri, at)
        if original is None:
            digests.add(uri, digest, Original(main.record_id, main.uri, main.date), self.path, at)
            self._uncommitted += 1
            if self._uncommitted >= _COMMIT_EVERY:
                digests.commit()
                self._uncommitted = 0
        if self._crawl is not None:
            self._crawl.stats.counters["warc revisits" if original else "warc responses"] += 1

    def _hops(self, response: Response) -> list[Written]:
        """The records of the redirect hops before ``response``: each hop's response (a ``3xx`` with its
        ``Location``; never a revisit) and request, as Heritrix and wget keep them, so replay follows them."""
        writer = self._writer
        assert writer is not None
        records: list[Written] = []
        for hop in hops_of(response):
            answer = writer.response(hop, payload_digest(writer.body_kept(hop)))
            records += [answer, writer.request(hop, answer.record_id)]
        if records and self._crawl is not None:
            self._crawl.stats.counters["warc redirects"] += len(records) // 2
        return records

    def _uri(self, url: str) -> str:
        assert self._crawl is not None
        return self._crawl.redactor.url(url)

    def _write(self, records: list[Written]) -> None:
        """Append ``records`` whole, and their index lines; a failed write is undone."""
        assert self._fd is not None
        data = b"".join(record.data for record in records)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            try:
                os.ftruncate(self._fd, self._size)
                os.lseek(self._fd, self._size, os.SEEK_SET)
            except OSError:
                pass
            raise
        offset = self._size
        assert self._spool is not None
        for record in records:
            if record.kind in ("response", "revisit"):
                self._spool.write(cdxj_line(record, self.path.name, offset))
            offset += len(record.data)
        self._size = offset
        self.records += len(records)


def _cut_spool(spool: Path, index: Path, offset: int) -> BinaryIO:
    """The index spool of a resumed archive, open for appending: the lines of the records before
    ``offset`` (from the spool a killed run left, or the index a paused run wrote)."""
    was = spool.with_name(spool.name + ".was")  # stays until its lines are copied: a kill meanwhile loses none
    for source in (spool, index):
        if not was.exists() and source.exists():
            os.replace(source, was)
    index.unlink(missing_ok=True)  # written again at the end
    out = spool.open("wb")
    if was.exists():
        with was.open("rb") as lines:
            out.writelines(line for line in lines if _offset(line) < offset)
        out.flush()
        was.unlink()
    return out


def _spool_path(archive: Path) -> Path:
    index = index_path(archive)
    return index.with_name(index.name + ".part")


def _offset(line: bytes) -> int:
    """The archive offset an index line names."""
    return int(json.loads(line.split(b" ", 2)[2])["offset"])


def _info(crawl: CrawlContext) -> dict[str, str]:
    """The ``warcinfo`` record's fields."""
    settings = crawl.settings
    return {
        "software": f"eclaw/{_version()}",
        "format": "WARC File Format 1.1",
        "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        "isPartOf": f"{crawl.spider.name} ({crawl.run_id})",
        "hostname": socket.gethostname(),
        "http-header-user-agent": settings.user_agent,
        "robots": "obey" if settings.obey_robots else "ignore",
    }


def _version() -> str:
    try:
        return metadata.version("eclaw")
    except metadata.PackageNotFoundError:
        return "unknown"
