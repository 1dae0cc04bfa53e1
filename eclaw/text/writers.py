"""Where the markdown outputs put a page's row: a JSONL file (a row per page) or a folder (a
``.md`` file per page, with front matter). Both make a resumed crawl hold each page once."""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import TYPE_CHECKING, Any, Protocol

from eclaw.exceptions import ConfigError
from eclaw.storage.files import JsonLinesExporter
from eclaw.storage.paths import resolve_path

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext
    from eclaw.spider import Spider

__all__ = ["FolderPages", "JsonlPages", "PageWriter", "page_file_name"]

_FRONT = ("url", "title", "language", "fetched")


class PageWriter(Protocol):
    """Writes one page's row (already redacted); resumable like any output."""

    @property
    def name(self) -> str:
        """The path as given (templates unfilled), for stats and logs."""

    def check(self, spider: str) -> None: ...

    async def open(self, crawl: CrawlContext) -> None: ...

    async def write(self, row: dict[str, Any], spider: Spider) -> None:
        """Write ``row`` at once, without suspending (no checkpoint may fall inside)."""

    def checkpoint(self) -> dict[str, Any]: ...

    def restore(self, saved: dict[str, Any]) -> None: ...

    async def flush(self) -> None: ...

    async def close(self) -> None: ...


class JsonlPages:
    """A row per page in a JSONL file, written through the JSONL file exporter: after a SIGKILL,
    ``--state`` resume cuts the file back to the last checkpoint (:mod:`eclaw.storage.files`)."""

    def __init__(self, path: str, *, run_key: str = "default", batch_items: int = 0, batch_bytes: int = 0) -> None:
        self.file = JsonLinesExporter(path, run_key=run_key, batch_items=batch_items, batch_bytes=batch_bytes)

    def __repr__(self) -> str:
        return f"JsonlPages({self.file.template!r})"

    @property
    def name(self) -> str:
        return self.file.template

    def check(self, spider: str) -> None:
        self.file.check(spider)

    async def open(self, crawl: CrawlContext) -> None:
        await self.file.open(crawl)

    async def write(self, row: dict[str, Any], spider: Spider) -> None:
        await self.file.process_item(row, spider)  # synchronous writes: it never suspends

    def checkpoint(self) -> dict[str, Any]:
        return self.file.checkpoint()

    def restore(self, saved: dict[str, Any]) -> None:
        self.file.restore(saved)

    async def flush(self) -> None:
        await self.file.flush()

    async def close(self) -> None:
        await self.file.close()


class FolderPages:
    """A ``.md`` file per page in a folder, named by a stable hash of the page's URL
    (:func:`page_file_name`) and written atomically (a temporary file, then a rename): a page
    written again by a resumed crawl replaces its own file, so each page is there once.
    The folder is created if its parent exists; files already in it are left alone."""

    def __init__(self, path: str, *, run_key: str = "default") -> None:
        self.template, self.run_key = path, run_key
        self.folder = resolve_path(path, "spider", run_key)
        self.pages = 0

    def __repr__(self) -> str:
        return f"FolderPages({self.template!r})"

    @property
    def name(self) -> str:
        return self.template

    def check(self, spider: str) -> None:
        folder = resolve_path(self.template, spider, self.run_key)
        if not folder.parent.is_dir():
            raise ConfigError(f"output directory does not exist: {folder.parent} (for the folder {folder})")
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"markdown pages go to a folder, and {folder} is a file")

    async def open(self, crawl: CrawlContext) -> None:
        self.folder = resolve_path(self.template, crawl.spider.name, self.run_key)
        self.check(crawl.spider.name)
        self.folder.mkdir(exist_ok=True)
        for stale in self.folder.glob(".*.md.tmp"):  # a write a SIGKILL interrupted
            stale.unlink(missing_ok=True)

    async def write(self, row: dict[str, Any], spider: Spider) -> None:
        name = page_file_name(row["url"])
        data = front_matter(row) + row["markdown"] + "\n"
        temporary = self.folder / f".{name}.tmp"
        try:
            temporary.write_text(data, encoding="utf-8")
            os.replace(temporary, self.folder / name)
        except OSError:
            temporary.unlink(missing_ok=True)
            raise
        self.pages += 1

    def checkpoint(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "pages": self.pages}

    def restore(self, saved: dict[str, Any]) -> None:
        self.pages = int(saved.get("pages", 0))

    async def flush(self) -> None:
        """Every page is a whole file at once: nothing waits."""

    async def close(self) -> None:
        """Nothing stays open between pages."""


def page_file_name(url: str) -> str:
    """``host-path-HASH.md`` for a (redacted) URL: readable, and the same name for the same URL."""
    digest = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    readable = re.sub(r"[^A-Za-z0-9]+", "-", url.partition("://")[2].partition("?")[0]).strip("-").lower()
    return f"{readable[:80].rstrip('-') or 'page'}-{digest}.md"


def front_matter(row: dict[str, Any]) -> str:
    """YAML front matter of a page's fields (JSON strings are YAML scalars)."""
    fields = "".join(f"{name}: {json.dumps(row.get(name), ensure_ascii=False)}\n" for name in _FRONT)
    return f"---\n{fields}---\n\n"
