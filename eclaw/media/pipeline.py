"""The files pipeline: an item's ``file_urls`` downloaded through the crawl, its ``files`` filled in.

Add ``eclaw.media.FilesPipeline`` to a spider's ``pipelines`` and set ``files_store`` (a directory, or a
destination URI such as ``s3://bucket/prefix``: :mod:`eclaw.media.remote`).
Each URL of the item's ``files_urls_field`` (``file_urls``) becomes a request of the crawl itself (the
same frontier, politeness, retries, sessions and proxies as a page), its body streamed to the store
(:mod:`eclaw.media.store`), never whole in memory, up to ``files_max_size`` bytes. The item waits
for its files, all in flight at once, then gets in ``files_result_field`` (``files``) one dict per
URL, in order: ``url``, ``path`` (under the store), ``checksum`` (SHA-256), ``size``,
``media_type`` and ``status``: ``downloaded``, ``uptodate`` (stored less than ``files_expires``
days ago: not fetched again) or ``failed`` with a ``reason`` (the item is still stored, as Scrapy does,
unless ``files_drop_failed``). The same URL in several items is fetched once. An item's files start
when the item is submitted (``prefetch``), so the files of the items queued behind the one being
processed are in flight too.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from eclaw.events import RequestFailed, RequestGenerated
from eclaw.exceptions import ConfigError, DropItem
from eclaw.http import Request, Response
from eclaw.http.types import COMPLETES, STREAM_TO
from eclaw.media.remote import DeliveryFailed, local_root, outbox_for
from eclaw.media.store import FileStore, Stored, TempFile
from eclaw.storage.paths import resolve_path

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext
    from eclaw.spider import Spider

__all__ = ["FileRefused", "FilesPipeline"]

logger = logging.getLogger(__name__)

_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,10}$")


class FileRefused(Exception):
    """A downloaded file a pipeline does not keep (an image too small...): the reason is the message."""


class FilesPipeline:
    """Downloads the files an item names through the crawl (see the module's docstring)."""

    def __init__(self) -> None:
        self._store: FileStore | None = None
        self._pending: dict[str, asyncio.Future[Stored]] = {}

    async def open(self, crawl: CrawlContext) -> None:
        settings = crawl.settings
        if not settings.files_store:
            raise ConfigError("FilesPipeline needs the files_store setting (a directory or a destination URI)")
        self._crawl = crawl
        self._urls_field, self._result_field = settings.files_urls_field, settings.files_result_field
        self._max_size, self._drop_failed = settings.files_max_size, settings.files_drop_failed
        crawl.redactor.learn_url(settings.files_store)  # an ftp:// password is masked wherever it is written
        spider = crawl.spider.name
        state = resolve_path(settings.state_dir, spider, settings.run_key) if settings.state_dir else None
        root = local_root(settings.files_store, spider, state)
        store = FileStore(root, settings.files_expires, crawl.redactor.url, outbox_for(settings.files_store))
        await store.open()
        self._store = store

    async def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def prefetch(self, item: Any) -> None:
        """Start fetching ``item``'s files as it is submitted, while the items before it are processed
        (:class:`~eclaw.core.pipeline.Prefetches`): several items' files are in flight at once."""
        if self._store is None:
            return
        for url in self._urls(item):
            if url not in self._pending and self._store.known(url) is None:
                self._pending[url] = asyncio.get_running_loop().create_future()
                self._fetch(url, self._pending[url])

    async def process_item(self, item: Any, spider: Spider) -> Any:
        urls = self._urls(item)
        if not urls:
            return item
        files = await asyncio.gather(*(self._file(url) for url in urls))
        _set(item, self._result_field, [stored.as_dict() for stored in files])
        failed = [stored.url for stored in files if stored.status == "failed"]
        if failed and self._drop_failed:
            raise DropItem(f"{len(failed)} file(s) failed: {failed[0]}")
        return item

    def _urls(self, item: Any) -> list[str]:
        urls = _get(item, self._urls_field)
        if not urls:
            return []
        return [urls] if isinstance(urls, str) else [str(url) for url in urls]

    async def _file(self, url: str) -> Stored:
        """``url``'s file: stored already, on its way for another item, or fetched now."""
        pending = self._pending.get(url)
        known = self._opened().known(url) if pending is None else None
        if known is not None:
            return known
        if pending is None:
            pending = self._pending[url] = asyncio.get_running_loop().create_future()
            self._fetch(url, pending)
        try:
            return await asyncio.shield(pending)
        finally:
            if pending.done():
                self._pending.pop(url, None)

    def _fetch(self, url: str, done: asyncio.Future[Stored]) -> None:
        store = self._opened()
        body = store.temp()

        async def arrived(response: Response) -> None:
            if not body.started:
                if not 200 <= response.status < 300:  # a status the spider handles: nothing streamed
                    _settle(done, _failed(url, f"status {response.status}"))
                    return
                await body.begin()  # a fetcher that does not stream (impersonate, browser): the body whole
                await body.write(response.body)
            media_type = response.headers.get("Content-Type", "").partition(";")[0].strip().lower()
            media_type = media_type or mimetypes.guess_type(url)[0] or "application/octet-stream"
            try:
                stored = await self.store_body(url, body, media_type)
            except (FileRefused, DeliveryFailed) as exc:
                body.discard()
                stored = _failed(url, str(exc))
            if stored.status == "failed" and stored.path:
                logger.warning("file %s failed: %s", url, stored.extra.get("reason", ""))
            _settle(done, stored)

        def failed(failure: RequestFailed) -> None:
            body.discard()
            _settle(done, _failed(url, str(failure.error)))

        meta = {STREAM_TO: body, "max_response_size": self._max_size, COMPLETES: True}
        request = Request(url, callback=arrived, errback=failed, meta=meta, dont_filter=True)
        self._crawl.emit(RequestGenerated(request=request, parent=None))

    async def store_body(self, url: str, body: TempFile, media_type: str) -> Stored:
        """Put ``body`` (whole in its temporary file) into the store: where a subclass checks or changes it.

        Raises:
            FileRefused: the file is not kept (the item lists it as failed).
            DeliveryFailed: a file it placed could not be delivered to a remote store.
        """
        return await self._commit(url, body, media_type)

    async def _commit(
        self, url: str, body: TempFile, media_type: str, extra: dict[str, Any] | None = None
    ) -> Stored:
        return await self._opened().commit(url, body, media_type, _extension(url, media_type), extra)

    def _opened(self) -> FileStore:
        if self._store is None:
            raise RuntimeError("FilesPipeline is not open")
        return self._store


def _failed(url: str, reason: str) -> Stored:
    logger.warning("file %s failed: %s", url, reason)
    return Stored(url, "", "", 0, "", "failed", {"reason": reason})


def _settle(done: asyncio.Future[Stored], stored: Stored) -> None:
    if not done.done():
        done.set_result(stored)


def _extension(url: str, media_type: str) -> str:
    """The file name's extension: the URL's (letters and digits, 10 at most), else the media type's."""
    match = _EXTENSION.search(urlsplit(url).path)
    if match is not None:
        return match.group().lower()
    return mimetypes.guess_extension(media_type) or ""


def _get(item: Any, field: str) -> Any:
    return item.get(field) if isinstance(item, dict) else getattr(item, field, None)


def _set(item: Any, field: str, value: Any) -> None:
    if isinstance(item, dict):
        item[field] = value
    else:
        setattr(item, field, value)
