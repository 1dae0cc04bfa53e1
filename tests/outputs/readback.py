"""Reading an output back with the standard library (and zstandard, pyarrow): what a user would do."""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import zstandard

OPENERS = {
    None: lambda data: data,
    "gz": gzip.decompress,  # every member, one after the other
    "bz2": bz2.decompress,
    "xz": lzma.decompress,
    "zst": lambda data: zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True).read(),
}


def plain_bytes(path: Path, compression: str | None) -> bytes:
    return OPENERS[compression](path.read_bytes())  # type: ignore[no-any-return, operator]


def read_rows(path: Path, fmt: str, compression: str | None = None) -> list[dict[str, Any]]:
    """The items in ``path`` (a CSV's cells as text)."""
    if fmt == "sqlite":
        with closing(sqlite3.connect(path)) as db:
            return [json.loads(data) for (data,) in db.execute("SELECT data FROM items ORDER BY rowid")]
    if fmt == "parquet":
        import pyarrow.parquet

        return pyarrow.parquet.read_table(path).to_pylist()  # type: ignore[no-any-return]
    text = plain_bytes(path, compression).decode("utf-8")
    if fmt == "jsonl":
        return [json.loads(line) for line in text.splitlines()]
    if fmt == "json":
        return json.loads(text)  # type: ignore[no-any-return]
    return list(csv.DictReader(io.StringIO(text, newline="")))
