"""The stream writer: a stream format's bytes, through a compression, into a destination's sink,
exactly once across checkpoints.

At each checkpoint (``flush``) the open compressed member is closed and the sink committed; the
sink's state, the encoder's and the counts are what the crawl saves (the objects named as the crawl's
redactor shows them: an ``ftp://`` password as ``***``, given back from the spec on resume). A resumed
run reopens the object, cuts it back to that state and starts a new member. Rotated objects (``%(batch)05d``) are
finished as each fills up; those a killed run began after its checkpoint are removed.
A compressed member is also closed every ``MEMBER_BYTES`` of items. A write that fails (a full disk)
is undone: uncompressed, the item's bytes; compressed, the whole open member (the object cut back
to its start, for a sink that :class:`~eclaw.outputs.api.Rewinds`), its items dead-lettered for
this output, named in the log; never an item counted written and lost.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from eclaw.exceptions import ConfigError
from eclaw.items import item_to_dict
from eclaw.outputs.api import (
    Compression,
    Compressor,
    Destination,
    Encoder,
    OutputOptions,
    OutputSpec,
    Rewinds,
    Sink,
    StreamFormat,
)
from eclaw.outputs.spool import spool_path
from eclaw.security.redact import MASK
from eclaw.storage.paths import fill_template, resolve_path

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext
    from eclaw.spider import Spider

__all__ = ["MEMBER_BYTES", "StreamOutput"]

logger = logging.getLogger(__name__)

MEMBER_BYTES = 1 << 20  # raw bytes in one compressed member at most: what a failed write may take back


class StreamOutput:
    """One output spec of a stream format: an ItemPipeline that Opens, Closes and is Resumable."""

    def __init__(
        self,
        spec: OutputSpec,
        fmt: StreamFormat,
        compression: Compression | None,
        destination: Destination,
        options: OutputOptions,
    ) -> None:
        self.spec, self.format, self.compression, self.destination = spec, fmt, compression, destination
        self.run_key = options.run_key
        self.batch_items, self.batch_bytes = options.batch_items, options.batch_bytes
        if spec.rotating and not (self.batch_items or self.batch_bytes):
            raise ConfigError(f"{spec.shown}: %(batch)d in an output needs output_batch_items or output_batch_bytes")
        if (self.batch_items or self.batch_bytes) and not spec.rotating:
            raise ConfigError(f"{spec.shown}: rotating outputs need %(batch)05d in the path")
        if options.partition_by:
            raise ConfigError(f"{spec.shown}: only Parquet outputs can be partitioned")
        self.count = 0  # items written, all objects
        self._crawl: CrawlContext | None = None
        self._member_start, self._member_raw = 0, 0  # the open member: where it began, raw bytes in it
        self._member_rows: list[dict[str, Any]] = []  # its items, dead-lettered if it cannot be written
        self._member_encoder: dict[str, Any] = {}
        self.locations: list[str] = []
        self._spider = "spider"
        self._sink: Sink | None = None
        self._encoder: Encoder | None = None
        self._member: Compressor | None = None
        self._resume: dict[str, Any] | None = None
        self._saved: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"StreamOutput({self.spec.shown!r})"

    @property
    def exactly_once(self) -> bool:
        return bool(self._sink.exactly_once) if self._sink is not None else True

    def _location(self, spider: str, batch: int) -> str:
        return fill_template(self.spec.location, spider, self.run_key, batch if self.spec.rotating else None)

    def check(self, spider: str) -> None:
        """Fail before the crawl (one line) if the destination cannot take spider ``spider``'s output."""
        self.destination.check(self._location(spider, 1))

    async def open(self, crawl: CrawlContext) -> None:
        self._spider, self._crawl = crawl.spider.name, crawl
        crawl.redactor.learn_url(self.spec.location)  # a password in the URI is masked wherever the crawl writes
        if self._resume is None:
            self._start(1)
        else:
            await self._reopen(self._resume)
        if not self.exactly_once:
            logger.info("output %s is not exactly-once: a resumed crawl may repeat items there", self.spec.shown)

    def _start(self, batch: int) -> None:
        location = self._location(self._spider, batch)
        self._sink = self.destination.open(location, self._spool(location))
        self.locations.append(location)
        self._encoder = self.format.encoder(self.spec)
        self._write(self._encoder.header())

    def _spool(self, location: str) -> Path:
        assert self._crawl is not None, "output not open"
        settings = self._crawl.settings
        state = resolve_path(settings.state_dir, self._spider, settings.run_key) if settings.state_dir else None
        return spool_path(location, state, self._crawl.run_id)

    async def _reopen(self, saved: dict[str, Any]) -> None:
        self.locations = [self._unmasked(shown, batch) for batch, shown in enumerate(saved["locations"], 1)]
        self.count = int(saved["items"])
        self._sink = self.destination.reopen(self.locations[-1], self._spool(self.locations[-1]))
        await self._sink.resume(saved["sink"])
        self._encoder = self.format.encoder(self.spec)
        self._encoder.restore(saved["encoder"])
        batch = len(self.locations) + 1
        while self.spec.rotating and self.destination.remove(self._location(self._spider, batch)):
            batch += 1  # an object begun after the checkpoint

    async def process_item(self, item: Any, spider: Spider) -> Any:
        assert self._encoder is not None and self._sink is not None, "output not open"
        if self.spec.rotating and self._encoder_items() and self._full():
            await self._finish()
            self._start(len(self.locations) + 1)
        row = item_to_dict(item)
        self._write(self._encoder.encode(row), row)
        self.count += 1
        return item

    def _encoder_items(self) -> int:
        assert self._encoder is not None
        return int(self._encoder.state().get("items", 0))

    def _full(self) -> bool:
        assert self._sink is not None
        in_file = self._encoder_items()
        return bool(
            (self.batch_items and in_file >= self.batch_items)
            or (self.batch_bytes and self._sink.size >= self.batch_bytes)
        )

    def _write(self, data: bytes, row: dict[str, Any] | None = None) -> None:
        """``data`` into the object; an OSError leaves the object as it was before the item (which the
        caller's error dead-letters) and before the member it was part of (whose items are dead-lettered)."""
        assert self._sink is not None and self._encoder is not None
        if not data:
            return
        if self.compression is None:
            self._sink.write(data)  # a failed write is undone by the sink
            return
        if self._member is None:
            self._member = self.compression.compressor()
            self._member_start, self._member_raw, self._member_rows = self._sink.size, 0, []
            self._member_encoder = self._encoder.state()
        try:
            self._sink.write(self._member.compress(data))
        except OSError as exc:
            self._abandon_member(exc, row)
            raise
        self._member_raw += len(data)
        if row is not None:
            self._member_rows.append(row)
        if self._member_raw >= MEMBER_BYTES:
            self._close_member()

    def _close_member(self) -> None:
        if self._member is None:
            return
        member, self._member = self._member, None
        try:
            assert self._sink is not None
            self._sink.write(member.flush())
        except OSError as exc:
            self._abandon_member(exc, None)
            return
        self._member_rows = []

    def _abandon_member(self, error: OSError, failing: dict[str, Any] | None) -> None:
        """A write into the open member failed (disk full): cut the object back to the member's start,
        the encoder back to its state then, and dead-letter the member's earlier items for this output."""
        assert self._sink is not None and self._encoder is not None
        self._member, rows = None, [row for row in self._member_rows if row is not failing]
        self._member_rows = []
        if isinstance(self._sink, Rewinds):
            self._sink.truncate(self._member_start)
        self._encoder.restore(self._member_encoder)
        logger.error("output %s: %s; %d items of its last member dead-lettered", self.spec.shown, error, len(rows))
        if rows and self._crawl is not None:
            self._crawl.dead_letter(self, rows, error)
            self.count -= len(rows)

    async def flush(self) -> None:
        """A checkpoint: close the compressed member, deliver it, commit the sink; remember the state."""
        assert self._sink is not None and self._encoder is not None, "output not open"
        self._close_member()
        sink_state = await self._sink.commit()
        self._saved = {  # saved with the crawl's state: the locations as the redactor shows them
            "locations": [self._masked(location) for location in self.locations],
            "sink": sink_state,
            "encoder": self._encoder.state(),
            "items": self.count,
        }

    def _masked(self, location: str) -> str:
        assert self._crawl is not None, "output not open"
        return self._crawl.redactor.url(location)

    def _unmasked(self, shown: str, batch: int) -> str:
        """A saved location, its password given back: the object of that batch this run would name, or
        (``{date}`` changed since) the saved one with the spec's user and password put back."""
        location = self._location(self._spider, batch)
        if self._masked(location) == shown:
            return location
        parts = urlsplit(self.spec.location)
        if parts.password is None:
            return shown
        return shown.replace(f"{parts.username}:{MASK}@", f"{parts.username}:{parts.password}@", 1)

    def checkpoint(self) -> dict[str, Any] | None:
        """The state the last :meth:`flush` committed."""
        return self._saved

    def restore(self, saved: dict[str, Any]) -> None:
        self._resume = saved

    async def _finish(self) -> None:
        assert self._encoder is not None and self._sink is not None
        self._write(self._encoder.footer())
        self._close_member()
        await self._sink.finish()

    async def close(self) -> None:
        if self._sink is not None:
            await self._finish()
            self._sink = None
            self._tidy()

    def _tidy(self) -> None:
        """Remove this run's own spool folder (a crawl without ``--state``) once its sinks delivered: the last
        output to close finds it empty. A spool kept for a delivery that failed keeps its folder."""
        assert self._crawl is not None, "output not open"
        if not self._crawl.settings.state_dir:
            with contextlib.suppress(OSError):
                spool_path("", None, self._crawl.run_id).parent.rmdir()
