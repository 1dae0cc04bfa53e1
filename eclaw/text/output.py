"""The markdown outputs: ``-o pages:markdown`` (a folder, a ``.md`` file per page, with front
matter: url, title, language, fetched) and ``-o pages.md.jsonl`` (a JSONL row per page: url,
title, language, fetched, markdown, and ``chunks`` with ``?chunks=MAX_CHARS``).

They watch pages, not items (:class:`eclaw.contracts.WatchesPages`): an HTML page answered 2xx is
extracted when downloaded, in a worker thread (the event loop goes on), and written when its
request ends parsed, in one step with no await, so a ``--state`` checkpoint never falls between
the write and the request's end: a resumed crawl holds each page once (see
:mod:`eclaw.text.writers`). Binary and non-HTML bodies (PDF, images, JSON, XML) are skipped and
counted. Every field written passes the crawl's redactor.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eclaw.events import RequestFailed, ResponseDownloaded, ResponseParsed
from eclaw.exceptions import ConfigError
from eclaw.text.extract import INSTALL, is_html
from eclaw.text.writers import FolderPages, JsonlPages, PageWriter

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext, Handler
    from eclaw.outputs.api import OutputOptions, OutputSpec
    from eclaw.spider import Spider
    from eclaw.text.markdown import Markdown

__all__ = ["MARKDOWN", "MD_JSONL", "PageOutput"]

logger = logging.getLogger(__name__)
_MAX_PENDING = 10_000  # extracted pages whose requests have not ended (bounded by the downloads in flight)


@dataclass(frozen=True, slots=True)
class _Extracted:
    markdown: Markdown
    fetched: str


class PageOutput:
    """Writes each HTML page's main content as markdown through ``writer``.

    Args:
        writer: where rows go (:class:`~eclaw.text.writers.JsonlPages`, :class:`~eclaw.text.writers.FolderPages`).
        chunks: with a positive number, each row also holds the page's chunks of at most that many
            characters (:meth:`eclaw.text.Markdown.chunks`), ``overlap`` characters repeated.
    """

    def __init__(self, writer: PageWriter, *, chunks: int = 0, overlap: int = 200) -> None:
        self.writer, self.chunk_chars, self.overlap = writer, chunks, overlap
        if chunks:
            _check_chunks(chunks, overlap)
        self._crawl: CrawlContext | None = None
        self._pending: dict[int, _Extracted] = {}

    def __repr__(self) -> str:
        return f"PageOutput({self.writer!r})"

    def check(self, spider: str) -> None:
        """Fail before any download: trafilatura missing, the file or folder not writable."""
        try:
            import trafilatura  # noqa: F401
        except ImportError:
            raise ConfigError(f"markdown outputs: {INSTALL}") from None
        self.writer.check(spider)

    def subscriptions(self) -> list[tuple[type[Any], Handler]]:
        """Extract when downloaded; write when parsed; forget when failed."""
        return [(ResponseDownloaded, self._downloaded), (ResponseParsed, self._parsed), (RequestFailed, self._failed)]

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        await self.writer.open(crawl)

    async def process_item(self, item: Any, spider: Spider) -> Any:
        """Items pass untouched: this output writes pages."""
        return item

    def checkpoint(self) -> dict[str, Any]:
        return self.writer.checkpoint()

    def restore(self, saved: dict[str, Any]) -> None:
        self.writer.restore(saved)

    async def flush(self) -> None:
        await self.writer.flush()

    async def close(self) -> None:
        self._pending.clear()
        await self.writer.close()

    # -- the pages ----------------------------------------------------------------------

    async def _downloaded(self, event: ResponseDownloaded) -> None:
        response = event.response
        if not 200 <= response.status < 300:
            return
        if not (response.is_text and is_html(response.headers, response.body)):
            self._count("skipped (not HTML)")
            return
        fetched = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        try:
            markdown = await asyncio.to_thread(response.markdown)  # cached on the response: the callback's too
        except ConfigError:
            raise
        except Exception as exc:  # a page the extractor chokes on: named, counted, the crawl goes on
            logger.warning("markdown: cannot extract %s: %s: %s", self._shown(response.url), type(exc).__name__, exc)
            self._count("failed")
            return
        if len(self._pending) >= _MAX_PENDING:
            self._pending.pop(next(iter(self._pending)))
        self._pending[id(response.request)] = _Extracted(markdown, fetched)

    async def _parsed(self, event: ResponseParsed) -> None:
        extracted = self._pending.pop(id(event.request), None)
        if extracted is None or self._crawl is None:
            return
        row = self._crawl.redactor.record(self._row(extracted))
        await self.writer.write(row, self._crawl.spider)  # no suspension: see the module's docstring
        self._count("pages" if extracted.markdown else "pages without main content")

    def _failed(self, event: RequestFailed) -> None:
        if event.final:
            self._pending.pop(id(event.request), None)

    def _row(self, extracted: _Extracted) -> dict[str, Any]:
        markdown = extracted.markdown
        row: dict[str, Any] = {
            "url": markdown.url,
            "title": markdown.page_title,
            "language": markdown.language,
            "fetched": extracted.fetched,
            "markdown": str(markdown),
        }
        if self.chunk_chars:
            row["chunks"] = [chunk.as_dict() for chunk in markdown.chunks(self.chunk_chars, self.overlap)]
        return row

    def _count(self, what: str) -> None:
        if self._crawl is not None:
            self._crawl.stats.counters[f"markdown {what}: {self.writer.name}"] += 1

    def _shown(self, url: str) -> str:
        return self._crawl.redactor.url(url) if self._crawl is not None else url


def _check_chunks(chunks: int, overlap: int) -> None:
    if chunks < 100 or not 0 <= overlap <= chunks // 2:
        raise ConfigError(
            f"markdown output: chunks={chunks}, overlap={overlap}: chunks must be at least 100"
            " and overlap between 0 and chunks // 2"
        )


def _int_option(spec: OutputSpec, name: str, default: int) -> int:
    value = spec.options.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"output {spec.shown}: ?{name}= takes a whole number, not {value!r}") from None


class _MarkdownFolder:
    """``-o DIR:markdown``: a ``.md`` file per page in the folder DIR."""

    name = "markdown"
    suffixes: tuple[str, ...] = ()

    def make(self, path: str, spec: OutputSpec, options: OutputOptions) -> PageOutput:
        if spec.scheme != "file":
            raise ConfigError(f"output {spec.shown}: markdown pages are written to a local folder")
        return PageOutput(FolderPages(path, run_key=options.run_key))


class _MarkdownJsonl:
    """``-o pages.md.jsonl``: a JSONL row per page (``?chunks=2000&overlap=200`` adds its chunks)."""

    name = "md"
    suffixes: tuple[str, ...] = (".md.jsonl",)

    def make(self, path: str, spec: OutputSpec, options: OutputOptions) -> PageOutput:
        if spec.scheme != "file":  # a staged upload would not watch pages
            raise ConfigError(f"output {spec.shown}: markdown pages are written to a local file")
        rotating = "%(batch)" in path
        writer = JsonlPages(
            path,
            run_key=options.run_key,
            batch_items=options.batch_items if rotating else 0,
            batch_bytes=options.batch_bytes if rotating else 0,
        )
        chunks, overlap = _int_option(spec, "chunks", 0), _int_option(spec, "overlap", 200)
        return PageOutput(writer, chunks=chunks, overlap=overlap)


MARKDOWN = _MarkdownFolder()
MD_JSONL = _MarkdownJsonl()
