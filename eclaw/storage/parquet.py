"""Parquet output (needs the optional ``pyarrow``: ``pip install 'eclaw[parquet]'``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eclaw.exceptions import ConfigError
from eclaw.items import item_to_dict
from eclaw.storage.paths import resolve_path

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext
    from eclaw.spider import Spider

__all__ = ["ParquetExporter"]

logger = logging.getLogger(__name__)


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ConfigError("Parquet output needs pyarrow: pip install 'eclaw[parquet]'") from None
    return pyarrow


class ParquetExporter:
    """Items buffered and written as Parquet row groups of ``row_group`` rows.

    One file (``items.parquet``), or with ``partition_by=("field", ...)`` a
    hive-style directory (``out/category=books/part-00001-0.parquet``). The
    column types come from the first row group; rows that do not fit them
    (or any write error) go to the dead-letter file, counted in the stats.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        partition_by: Sequence[str] = (),
        run_key: str = "default",
        batch_items: int = 0,
        batch_bytes: int = 0,
        row_group: int = 10_000,
        item_key: Sequence[str] = (),
    ) -> None:
        self.pa = _pyarrow()
        if batch_items or batch_bytes:
            raise ConfigError(f"{path}: Parquet outputs are not rotated (they are written in row groups)")
        self.template = str(path)
        self.partition_by = tuple(partition_by)
        self.run_key = run_key
        self.row_group = row_group
        self.path = resolve_path(path, "spider", run_key)
        self.count = 0
        self._rows: list[dict[str, Any]] = []
        self._writer: Any = None
        self._schema: Any = None
        self._parts = 0
        self._crawl: CrawlContext | None = None

    def __repr__(self) -> str:
        return f"ParquetExporter({self.template!r})"

    def check(self, spider: str) -> None:
        path = resolve_path(self.template, spider, self.run_key)
        if not path.parent.is_dir():
            raise ConfigError(f"output directory does not exist: {path.parent} (for {path})")

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        self.path = resolve_path(self.template, crawl.spider.name, self.run_key)
        self.check(crawl.spider.name)
        if self.partition_by and self.path.exists():
            import shutil

            shutil.rmtree(self.path) if self.path.is_dir() else self.path.unlink()  # a re-run replaces its output

    async def process_item(self, item: Any, spider: Spider) -> Any:
        row = item_to_dict(item)
        missing = [name for name in self.partition_by if row.get(name) in (None, "")]
        if missing:
            raise ValueError(f"item has no value for partition field {missing[0]!r}")
        self._rows.append(row)
        if len(self._rows) >= self.row_group:
            self._flush()
        return item

    def _flush(self) -> None:
        rows, self._rows = self._rows, []
        if not rows:
            return
        try:
            table = self.pa.Table.from_pylist(rows, schema=self._schema)
            if self._schema is None:
                self._schema = table.schema
            if self.partition_by:
                self._parts += 1
                self.pa.parquet.write_to_dataset(
                    table,
                    root_path=str(self.path),
                    partition_cols=list(self.partition_by),
                    basename_template=f"part-{self._parts:05d}-{{i}}.parquet",
                )
            else:
                if self._writer is None:
                    self._writer = self.pa.parquet.ParquetWriter(str(self.path), self._schema)
                self._writer.write_table(table)
            self.count += len(rows)
        except (self.pa.ArrowException, OSError, ValueError, TypeError) as exc:
            logger.error(
                "Parquet %s: could not write %d items (%s); they go to the dead-letter file", self.path, len(rows), exc
            )
            if self._crawl is not None:
                self._crawl.dead_letter(self, rows, exc)

    async def close(self) -> None:
        try:
            self._flush()
        finally:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
