"""File exporters: outputs that write items to JSONL, JSON and CSV files.

Output paths may hold placeholders, filled when a crawl starts: ``{spider}``,
``{run_key}``, ``{date}`` (UTC, YYYY-MM-DD), and ``%(batch)05d`` for rotated
files (a new file every ``batch_items`` items or ``batch_bytes`` bytes).
File exporters write each item through to disk; a write that fails (disk full,
file gone) is undone and raises, so the item is dead-lettered, never half-written.
"""

from __future__ import annotations

import abc
import csv
import io
import itertools
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eclaw.contracts import CrawlContext
from eclaw.exceptions import ConfigError
from eclaw.items import item_to_dict
from eclaw.storage.paths import resolve_path

if TYPE_CHECKING:
    from eclaw.spider import Spider

__all__ = ["CsvExporter", "FileExporter", "JsonExporter", "JsonLinesExporter"]

_JSON = json.JSONEncoder(ensure_ascii=False, default=str)  # made once: json.dumps with options makes one per call


class FileExporter(abc.ABC):
    """Base of the file exporters: placeholders, rotation, write-through with undo on failure.

    A format subclasses it and defines :meth:`encode` (and :meth:`header` / :meth:`footer` if it has them).
    """

    def __init__(
        self, path: str | Path, *, run_key: str = "default", batch_items: int = 0, batch_bytes: int = 0
    ) -> None:
        self.template = str(path)
        self.run_key = run_key
        self.rotating = "%(batch)" in self.template
        self.batch_items = batch_items
        self.batch_bytes = batch_bytes
        if self.rotating and not (batch_items or batch_bytes):
            raise ConfigError(f"{path}: %(batch)d in an output path needs output_batch_items or output_batch_bytes")
        if (batch_items or batch_bytes) and not self.rotating:
            raise ConfigError(f"{path}: rotating outputs need %(batch)05d in the path")
        self.count = 0  # items written, all files
        self.paths: list[Path] = []
        self.path = resolve_path(path, "spider", run_key, 1 if self.rotating else None)
        self._spider = "spider"
        self._fd: int | None = None
        self._size = 0  # bytes in the current file
        self._in_file = 0  # items in the current file
        self._resume: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.template!r})"

    def check(self, spider: str) -> None:
        """Fail early, before any download, if spider ``spider``'s file cannot be written."""
        path = resolve_path(self.template, spider, self.run_key, 1 if self.rotating else None)
        if not path.parent.is_dir():
            raise ConfigError(f"output directory does not exist: {path.parent} (for {path})")
        if path.is_dir():
            raise ConfigError(f"output path is a directory: {path}")

    async def open(self, crawl: CrawlContext) -> None:
        self._spider = crawl.spider.name
        if self._resume is None:
            self._open_file(1)
        else:
            self._reopen(self._resume)

    def checkpoint(self) -> dict[str, Any]:
        """Where the output stands, for a saved crawl (see :mod:`eclaw.core.state`)."""
        return {
            "path": str(self.path),
            "paths": [str(p) for p in self.paths],
            "offset": self._size,
            "items": self.count,
            "in_file": self._in_file,
        }

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue a saved crawl's output from its checkpoint when opened."""
        self._resume = saved

    def _reopen(self, saved: dict[str, Any]) -> None:
        path, offset = Path(saved["path"]), int(saved["offset"])
        size = path.stat().st_size if path.exists() else -1
        if size < offset:
            raise ConfigError(
                f"output {path} is shorter than the saved crawl wrote ({max(size, 0)} < {offset} bytes):"
                " it was changed; remove the state directory to start over"
            )
        self._fd = os.open(path, os.O_WRONLY)
        os.ftruncate(self._fd, offset)  # the items after the checkpoint are written again
        os.lseek(self._fd, offset, os.SEEK_SET)
        self.path, self.paths = path, [Path(p) for p in saved["paths"]]
        self._size, self._in_file, self.count = offset, int(saved["in_file"]), int(saved["items"])
        batch = len(self.paths) + 1
        while self.rotating and (later := resolve_path(self.template, self._spider, self.run_key, batch)).exists():
            later.unlink()  # a file begun after the checkpoint
            batch += 1

    def _open_file(self, batch: int) -> None:
        self.path = resolve_path(self.template, self._spider, self.run_key, batch if self.rotating else None)
        self.check(self._spider)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.paths.append(self.path)
        self._size = self._in_file = 0
        self._write(self.header())

    async def process_item(self, item: Any, spider: Spider) -> Any:
        if (
            self.rotating
            and self._in_file
            and (
                (self.batch_items and self._in_file >= self.batch_items)
                or (self.batch_bytes and self._size >= self.batch_bytes)
            )
        ):
            self._close_file()
            self._open_file(len(self.paths) + 1)
        self._write(self.encode(item_to_dict(item)))
        self._in_file += 1
        self.count += 1
        return item

    def _write(self, data: bytes) -> None:
        assert self._fd is not None, "exporter not open"
        if not data:  # an empty header or footer: no system call
            return
        try:
            written = os.write(self._fd, data)
            if written < len(data):  # a partial write: the rest, in as many writes as it takes
                view = memoryview(data)[written:]
                while view:
                    view = view[os.write(self._fd, view) :]
        except OSError:
            try:
                os.ftruncate(self._fd, self._size)  # undo the partial item
                os.lseek(self._fd, self._size, os.SEEK_SET)
            except OSError:
                pass
            raise
        self._size += len(data)

    def _close_file(self) -> None:
        if self._fd is not None:
            try:
                self._write(self.footer())
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    async def flush(self) -> None:
        """Every item is written through at once: nothing waits in a buffer."""
        return None

    async def close(self) -> None:
        self._close_file()

    def header(self) -> bytes:
        return b""

    def footer(self) -> bytes:
        return b""

    @abc.abstractmethod
    def encode(self, row: dict[str, Any]) -> bytes:
        """One item's bytes in this format."""


class JsonLinesExporter(FileExporter):
    """One JSON object per line (``.jsonl``, ``.jl``, ``.ndjson``)."""

    def encode(self, row: dict[str, Any]) -> bytes:
        return (_JSON.encode(row) + "\n").encode()


class JsonExporter(FileExporter):
    """A JSON array of objects (``.json``), valid once closed."""

    def header(self) -> bytes:
        return b"["

    def encode(self, row: dict[str, Any]) -> bytes:
        prefix = "\n" if self._in_file == 0 else ",\n"
        return (prefix + _JSON.encode(row)).encode()

    def footer(self) -> bytes:
        return b"\n]\n"


class CsvExporter(FileExporter):
    """CSV with a header row.

    Columns: ``fields`` if given (other keys are left out), else the union of the
    items' keys in the order first seen (a dataclass's field order). An item with a
    field no earlier item had widens the file: it is rewritten once with the new
    column at the end (earlier rows get empty cells, atomically: a crash leaves the
    old file or the new one), so items of different shapes all fit. Nested values
    are JSON-encoded; missing values are empty.
    """

    def __init__(self, path: str | Path, fields: list[str] | None = None, **options: Any) -> None:
        super().__init__(path, **options)
        self.fields = list(fields) if fields else None
        self._fixed = fields is not None  # columns chosen by the caller: never widened
        self._wrote_header = False

    def _open_file(self, batch: int) -> None:
        super()._open_file(batch)
        self._wrote_header = False

    def checkpoint(self) -> dict[str, Any]:
        return {**super().checkpoint(), "fields": list(self.fields or ())}

    def _reopen(self, saved: dict[str, Any]) -> None:
        fields, path = saved.get("fields"), Path(saved["path"])
        _tmp(path).unlink(missing_ok=True)
        if fields and path.is_file() and _header(path) != fields:  # widened after the checkpoint: undo it
            saved = {**saved, "offset": _rewrite(path, fields, int(saved["in_file"]))}
        super()._reopen(saved)
        self.fields = fields or self.fields
        self._wrote_header = self._in_file > 0

    def encode(self, row: dict[str, Any]) -> bytes:
        if self.fields is None:
            self.fields = list(row)
        elif not self._fixed and not row.keys() <= set(self.fields):
            self._widen([key for key in row if key not in self.fields])
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=self.fields, extrasaction="ignore")
        if not self._wrote_header:
            writer.writeheader()
            self._wrote_header = True
        writer.writerow({k: _cell(v) for k, v in row.items()})
        return buffer.getvalue().encode()

    def _widen(self, new: list[str]) -> None:
        """Add the columns ``new``; the rows already written get empty cells for them."""
        assert self.fields is not None and self._fd is not None
        self.fields = self.fields + new
        if not self._wrote_header:
            return
        os.close(self._fd)
        self._fd = None
        self._size = _rewrite(self.path, self.fields, self._in_file)
        self._fd = os.open(self.path, os.O_WRONLY)
        os.lseek(self._fd, self._size, os.SEEK_SET)


def _tmp(path: Path) -> Path:
    return path.with_name(path.name + ".eclaw-tmp")


def _header(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as file:
        return next(csv.reader(file), [])


def _rewrite(path: Path, fields: list[str], rows: int) -> int:
    """Rewrite the CSV file ``path`` with the header ``fields`` and its first ``rows`` rows, each
    padded or cut to the columns (atomically, through a temporary file); returns its new size."""
    tmp = _tmp(path)
    with path.open(newline="", encoding="utf-8") as source, tmp.open("w", newline="", encoding="utf-8") as target:
        reader, writer = csv.reader(source), csv.writer(target)
        next(reader, None)
        writer.writerow(fields)
        width = len(fields)
        for row in itertools.islice(reader, rows):
            writer.writerow((row + [""] * width)[:width])
        target.flush()
        os.fsync(target.fileno())
    os.replace(tmp, path)
    return path.stat().st_size


def _cell(value: Any) -> Any:
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, default=str)
    return value
