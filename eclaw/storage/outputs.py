"""The output for a path, chosen by its extension (``-o items.csv``, ``Engine(outputs=[...])``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eclaw.contracts import ItemPipeline
from eclaw.exceptions import ConfigError
from eclaw.storage.files import CsvExporter, JsonExporter, JsonLinesExporter
from eclaw.storage.parquet import ParquetExporter
from eclaw.storage.store import SqliteStore

__all__ = ["output_for"]

_FORMATS: dict[str, str] = {
    ".jsonl": "jsonl",
    ".jl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".sqlite": "sqlite",
    ".sqlite3": "sqlite",
    ".db": "sqlite",
}


def output_for(path: str | Path, spider: str | None = None, **options: Any) -> ItemPipeline:
    """The exporter for ``path``, chosen by its extension; with ``spider``, checked
    (before any download) to be writable for that spider.

    ``options``: ``run_key``, ``batch_items``, ``batch_bytes`` (rotation),
    ``item_key`` (SQLite), ``partition_by`` (Parquet). Parquet and SQLite buffer
    items: those they fail to write go to the crawl's dead-letter file.
    """
    suffix = Path(str(path).split("%(batch)")[-1]).suffix.lower() or Path(path).suffix.lower()
    kind = _FORMATS.get(suffix)
    if kind is None:
        known = ", ".join(sorted(_FORMATS))
        raise ConfigError(f"unsupported output format {suffix or '(none)'!r} for {path} (use {known})")
    exporter: Any
    if kind == "sqlite":
        for name in ("batch_items", "batch_bytes", "partition_by"):
            options.pop(name, None)
        exporter = SqliteStore(path, **options)
    elif kind == "parquet":
        exporter = ParquetExporter(path, **options)
    else:
        if options.get("partition_by"):
            raise ConfigError(f"{path}: only Parquet outputs can be partitioned")
        for name in ("item_key", "partition_by"):
            options.pop(name, None)
        cls = {"jsonl": JsonLinesExporter, "json": JsonExporter, "csv": CsvExporter}[kind]
        exporter = cls(path, **options)
    if spider is not None:
        exporter.check(spider)
    return exporter  # type: ignore[no-any-return]
