"""Feed exporters: pipelines that write items to JSONL or CSV files."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from eclaw.exceptions import ConfigError
from eclaw.items import item_to_dict
from eclaw.pipeline import ItemPipeline

if TYPE_CHECKING:
    from eclaw.spider import Spider

__all__ = ["CsvExporter", "JsonLinesExporter", "exporter_for"]


class _FileExporter:
    """Writes to ``path`` incrementally; the file is flushed and closed on ``close``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.count = 0
        self._file: IO[str] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def check(self) -> None:
        """Fail early, before any download, if the file cannot be written."""
        parent = self.path.parent
        if not parent.is_dir():
            raise ConfigError(f"output directory does not exist: {parent} (for {self.path})")
        if self.path.is_dir():
            raise ConfigError(f"output path is a directory: {self.path}")

    async def open(self, spider: Spider) -> None:
        self.check()
        self._file = self.path.open("w", encoding="utf-8", newline="")

    async def close(self, spider: Spider) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class JsonLinesExporter(_FileExporter):
    """One JSON object per line (``.jsonl``, ``.jl``, ``.ndjson``)."""

    async def process_item(self, item: Any, spider: Spider) -> Any:
        assert self._file is not None, "exporter not open"
        self._file.write(json.dumps(item_to_dict(item), ensure_ascii=False, default=str) + "\n")
        self.count += 1
        return item


class CsvExporter(_FileExporter):
    """CSV with a header row. Columns: ``fields`` if given, else the first
    item's keys in order; nested values are JSON-encoded. An item with a key
    outside the columns is refused (and so dead-lettered), never truncated.
    """

    def __init__(self, path: str | Path, fields: list[str] | None = None) -> None:
        super().__init__(path)
        self.fields = fields
        self._writer: Any = None

    async def process_item(self, item: Any, spider: Spider) -> Any:
        assert self._file is not None, "exporter not open"
        row = item_to_dict(item)
        if self._writer is None:
            self.fields = self.fields or list(row)
            self._writer = csv.DictWriter(self._file, fieldnames=self.fields)
            self._writer.writeheader()
        extra = [key for key in row if key not in self.fields]  # type: ignore[operator]
        if extra:
            raise ValueError(f"item has fields not in the CSV columns: {', '.join(extra)}")
        self._writer.writerow({k: _cell(v) for k, v in row.items()})
        self.count += 1
        return item


def _cell(value: Any) -> Any:
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, default=str)
    return value


_FORMATS: dict[str, type[_FileExporter]] = {
    ".jsonl": JsonLinesExporter,
    ".jl": JsonLinesExporter,
    ".ndjson": JsonLinesExporter,
    ".csv": CsvExporter,
}


def exporter_for(path: str | Path) -> ItemPipeline:
    """The exporter for ``path``, chosen by its extension."""
    suffix = Path(path).suffix.lower()
    cls = _FORMATS.get(suffix)
    if cls is None:
        known = ", ".join(sorted(_FORMATS))
        raise ConfigError(f"unsupported output format {suffix or '(none)'!r} for {path} (use {known})")
    exporter = cls(path)
    exporter.check()
    return exporter  # type: ignore[return-value]
