"""The output for a spec: its format, compression and destination, each from its registry."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from eclaw.contracts import WatchesPages
from eclaw.exceptions import ConfigError
from eclaw.outputs.api import (
    Compression,
    Destination,
    DestinationFactory,
    FileFormat,
    ItemDestinationFactory,
    OutputOptions,
    OutputSpec,
    StreamFormat,
)
from eclaw.outputs.registry import COMPRESSIONS, DESTINATIONS, FORMATS
from eclaw.outputs.spec import parse_spec
from eclaw.outputs.stream import StreamOutput
from eclaw.security.redact import redact_url
from eclaw.storage.files import CsvExporter, JsonExporter, JsonLinesExporter
from eclaw.storage.paths import fill_template, resolve_path

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext, ItemPipeline
    from eclaw.spider import Spider

__all__ = ["Staged", "output_for", "output_name"]

_PLAIN_FILES = {"jsonl": JsonLinesExporter, "json": JsonExporter, "csv": CsvExporter}


def output_for(spec: str | Path | OutputSpec, spider: str | None = None, **options: Any) -> ItemPipeline:
    """The output for ``spec`` (a path, ``-``, a URL; see :mod:`eclaw.outputs.api`); with ``spider``,
    checked (before any download) to be writable for that spider.

    ``options``: ``run_key``, ``batch_items``, ``batch_bytes`` (rotation), ``item_key`` (SQLite),
    ``partition_by`` (Parquet). Parquet and SQLite buffer items: those they fail to write go to the
    crawl's dead-letter file.
    """
    parsed = spec if isinstance(spec, OutputSpec) else parse_spec(str(spec))
    settings = OutputOptions(
        run_key=options.get("run_key", "default"),
        batch_items=options.get("batch_items", 0),
        batch_bytes=options.get("batch_bytes", 0),
        partition_by=tuple(options.get("partition_by", ())),
        item_key=tuple(options.get("item_key", ())),
    )
    output = _build(parsed, settings)
    if spider is not None:
        output.check(spider)
    return output  # type: ignore[no-any-return]


def output_name(spec: str | Path | OutputSpec, spider: str, run_key: str) -> str:
    """The name a crawl knows an output by (its stats' ``items_written`` key): a local file's path,
    else the spec with its templates filled (``-``, ``s3://b/k.jsonl``)."""
    parsed = spec if isinstance(spec, OutputSpec) else parse_spec(str(spec))
    if parsed.scheme == "file":
        return str(resolve_path(parsed.location, spider, run_key))
    return redact_url(fill_template(parsed.text, spider, run_key))  # a name is written: stats, state, logs


def _build(spec: OutputSpec, options: OutputOptions) -> Any:
    factory = DESTINATIONS.get(spec.scheme)
    if spec.format is None:
        if not isinstance(factory, ItemDestinationFactory):
            raise ConfigError(f"output {spec.shown}: {spec.scheme}:// is not an item destination")
        return factory.make_items(spec, options)
    if not isinstance(factory, DestinationFactory):
        raise ConfigError(f"output {spec.shown}: {spec.scheme}:// takes items whole, not a format")
    destination = factory.make(spec)
    fmt = FORMATS.get(spec.format)
    compression: Compression | None = COMPRESSIONS.get(spec.compression) if spec.compression else None
    if isinstance(fmt, StreamFormat):
        plain = _PLAIN_FILES.get(spec.format)
        if spec.scheme == "file" and compression is None and plain is not None and not spec.options:
            if options.partition_by:
                raise ConfigError(f"{spec.shown}: only Parquet outputs can be partitioned")
            return plain(
                spec.location, run_key=options.run_key, batch_items=options.batch_items, batch_bytes=options.batch_bytes
            )
        return StreamOutput(spec, fmt, compression, destination, options)
    if isinstance(fmt, FileFormat):
        if compression is not None:
            raise ConfigError(f"output {spec.shown}: the {fmt.name} format takes no compression (.{compression.name})")
        if spec.scheme == "file":
            return fmt.make(spec.location, spec, options)
        return Staged(spec, fmt, destination, options)
    raise ConfigError(f"output format {spec.format!r} is neither a stream format nor a file format")


class Staged:
    """A whole-file format for a remote destination: written to a local staging file, uploaded
    when the crawl closes (not resumable: the upload happens once, at the end)."""

    def __init__(self, spec: OutputSpec, fmt: FileFormat, destination: Destination, options: OutputOptions) -> None:
        self.spec, self.destination, self.run_key = spec, destination, options.run_key
        self._staged_template = str(destination.staging_path(spec.location))
        self.inner = fmt.make(self._staged_template, spec, options)
        if isinstance(self.inner, WatchesPages):  # its pages, its index beside it: kept where it was written
            raise ConfigError(
                f"output {spec.shown}: the {fmt.name} format writes pages to a local file; copy it after the crawl"
            )
        self._spider = "spider"

    def __repr__(self) -> str:
        return f"Staged({self.spec.shown!r})"

    def check(self, spider: str) -> None:
        self.destination.check(fill_template(self.spec.location, spider, self.run_key))
        self.inner.check(spider)

    async def open(self, crawl: CrawlContext) -> None:
        self._spider = crawl.spider.name
        await self.inner.open(crawl)

    async def process_item(self, item: Any, spider: Spider) -> Any:
        return await self.inner.process_item(item, spider)

    async def close(self) -> None:
        await self.inner.close()
        staged = Path(fill_template(self._staged_template, self._spider, self.run_key))
        await self.destination.upload(staged, fill_template(self.spec.location, self._spider, self.run_key))
