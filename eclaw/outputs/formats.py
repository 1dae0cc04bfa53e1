"""The built-in formats: JSONL, JSON and CSV stream items as bytes; SQLite and Parquet own a file.

Registered as ``eclaw.formats`` entry points (``pyproject.toml``). A plain local ``.jsonl``,
``.json`` or ``.csv`` file (no compression) is written by the file exporters of
:mod:`eclaw.storage.files` (rotation, CSV widening by rewriting the file); any other destination or
a compression streams through these encoders (:mod:`eclaw.outputs.stream`), where a CSV's
columns are fixed: by ``?fields=a,b`` or the first item (an item with a field outside them is
dead-lettered, named).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

from eclaw.exceptions import ConfigError
from eclaw.outputs.api import Encoder, OutputOptions, OutputSpec

__all__ = ["CSV", "JSON", "JSONL", "PARQUET", "SQLITE"]

_JSON = json.JSONEncoder(ensure_ascii=False, default=str)


class _Counted:
    """An encoder's count of items in its file (its resumable state)."""

    def __init__(self) -> None:
        self.items = 0

    def header(self) -> bytes:
        return b""

    def footer(self) -> bytes:
        return b""

    def state(self) -> dict[str, Any]:
        return {"items": self.items}

    def restore(self, saved: dict[str, Any]) -> None:
        self.items = int(saved.get("items", 0))


class _JsonLinesEncoder(_Counted):
    def encode(self, row: dict[str, Any]) -> bytes:
        self.items += 1
        return (_JSON.encode(row) + "\n").encode()


class _JsonEncoder(_Counted):
    """The ``[`` comes with the first item (or the footer of an empty file): a file cut back to
    before its first item has none."""

    def encode(self, row: dict[str, Any]) -> bytes:
        prefix = "[\n" if self.items == 0 else ",\n"
        self.items += 1
        return (prefix + _JSON.encode(row)).encode()

    def footer(self) -> bytes:
        return b"\n]\n" if self.items else b"[]\n"


class _CsvEncoder(_Counted):
    def __init__(self, fields: list[str] | None) -> None:
        super().__init__()
        self.fields, self._given = fields, fields

    def encode(self, row: dict[str, Any]) -> bytes:
        buffer = io.StringIO()
        header = self.items == 0  # the header row comes with the first item
        if self.fields is None:
            self.fields = list(row)
        extra = [key for key in row if key not in self.fields]
        if extra:
            raise ValueError(
                f"CSV columns are fixed here ({', '.join(self.fields)}): the item's {', '.join(extra)} has no column"
                " (name them all with ?fields=a,b,c, or write a plain local .csv)"
            )
        writer = csv.DictWriter(buffer, fieldnames=self.fields)
        if header:
            writer.writeheader()
        writer.writerow({k: _cell(v) for k, v in row.items()})
        self.items += 1
        return buffer.getvalue().encode()

    def state(self) -> dict[str, Any]:
        return {"items": self.items, "fields": self.fields}

    def restore(self, saved: dict[str, Any]) -> None:
        super().restore(saved)
        self.fields = saved.get("fields") if self.items else self._given  # no row yet: columns not chosen


def _cell(value: Any) -> Any:
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, default=str)
    return value


@dataclass(frozen=True, slots=True)
class _Stream:
    name: str
    suffixes: tuple[str, ...]

    def encoder(self, spec: OutputSpec) -> Encoder:
        if self.name == "csv":
            fields = [f.strip() for f in spec.options.get("fields", "").split(",") if f.strip()]
            return _CsvEncoder(fields or None)
        return _JsonEncoder() if self.name == "json" else _JsonLinesEncoder()


class _Sqlite:
    name = "sqlite"
    suffixes = (".sqlite", ".sqlite3", ".db")

    def make(self, path: str, spec: OutputSpec, options: OutputOptions) -> Any:
        from eclaw.storage.store import SqliteStore

        return SqliteStore(path, run_key=options.run_key, item_key=options.item_key)


class _Parquet:
    name = "parquet"
    suffixes = (".parquet",)

    def make(self, path: str, spec: OutputSpec, options: OutputOptions) -> Any:
        from eclaw.storage.parquet import ParquetExporter

        if spec.rotating:
            raise ConfigError(f"{spec.shown}: Parquet outputs are not rotated (they are written in row groups)")
        return ParquetExporter(
            path,
            partition_by=options.partition_by,
            run_key=options.run_key,
            batch_items=options.batch_items,
            batch_bytes=options.batch_bytes,
        )


JSONL = _Stream("jsonl", (".jsonl", ".jl", ".ndjson"))
JSON = _Stream("json", (".json",))
CSV = _Stream("csv", (".csv",))
SQLITE = _Sqlite()
PARQUET = _Parquet()
