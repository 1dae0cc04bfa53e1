"""The contracts of outputs: what a format, a compression, a destination plug-in implements.

An output is chosen by one text, its **spec** (``-o SPEC``, repeatable; ``Engine(outputs=[...])``;
the ``outputs`` setting)::

    items.jsonl               a local file (format from the suffix)
    file:///data/items.csv    the same, as a URL
    items.jsonl.gz            format jsonl, compression gz (``.gz .zst .bz2 .xz``)
    -                         stdout, JSONL
    stdout:csv                stdout, CSV: a trailing ``:FORMAT`` names the format (as Scrapy's ``-o x:jsonlines``);
                              ``-:csv`` is the same (on the command line: ``-o=-:csv``, as argparse reads ``-:``
                              as an option); ``stdout:`` alone is Scrapy's spelling of ``-``
    s3://bucket/{spider}/items-%(batch)05d.jsonl.zst?region=eu-west-1
    postgresql://user@host/db?table=items      an item destination: no format, no compression

Parsing (:func:`eclaw.outputs.spec.parse_spec`) gives an :class:`OutputSpec`: ``scheme`` is ``file`` for
a bare path and ``file://``, ``stdout`` for ``-``, else the URL's scheme; the query string of a URL
(``?k=v``) becomes ``options``. The format is the explicit ``:FORMAT`` or found by suffix: first the
longest suffix a format claims itself (``.warc.gz`` is claimed by the warc format, which compresses
its own records), else a compression suffix is taken off and the suffix before it names the format
(``items.jsonl.gz`` = jsonl + gz).

**Plug-ins** are Python entry points; eclaw's built-ins are registered the same way in its
``pyproject.toml``. An entry point is loaded only when its name is used (start-up stays cheap):

- ``eclaw.formats``, keyed by format name: a :class:`StreamFormat` (items to bytes: jsonl, json, csv)
  or a :class:`FileFormat` (owns a local file: sqlite, parquet, warc, markdown). The object loaded is
  the format itself (a module-level instance or a class whose attributes are the protocol's).
- ``eclaw.compressions``, keyed by suffix without the dot (``gz``): a :class:`Compression`.
- ``eclaw.destinations``, keyed by URL scheme (``file``, ``stdout``, ``s3``...): a
  :class:`DestinationFactory` (bytes go there: ``make(spec) -> Destination``) or an
  :class:`ItemDestinationFactory` (items go there whole, e.g. PostgreSQL: ``make_items(spec) -> output``).
- ``eclaw.fetchers`` (keyed by fetcher name) and ``eclaw.discovery_sources`` (keyed by source name).

**Bytes and exactly-once.** A stream format's bytes, through the compression, go to a :class:`Sink`.
A sink writes synchronously into a LOCAL spool file (a slow or broken remote never blocks the crawl
nor loses an item): for a local file the spool IS the file. At each checkpoint the stream writer
closes the compressed member it has open (gzip, bz2, xz and zstd files are each a sequence of
members/frames, concatenated) and awaits :meth:`Sink.commit`, whose returned state the crawl saves.
After a SIGKILL, ``--state`` resume calls :meth:`Sink.resume` with that state: what came after it is
dropped (a local file is truncated back to the saved offset), so every item is there exactly once.
:meth:`Sink.finish` completes the object at the crawl's end (S3: completes the multipart upload).
A sink with ``exactly_once = False`` (stdout, FTP) makes eclaw say so in one line at start.
A commit that fails (a remote down) raises; the bytes stay in the spool and the next commit or the
resumed run delivers them; the error line names the output and the reason.

**Whole-file formats** (:class:`FileFormat`) write a local file themselves. With a remote destination
they write to a local staging path (``Destination.staging_path()``) and the destination uploads
the finished file at the crawl's end (:meth:`Destination.upload`).

**Outputs that watch pages** (WARC, markdown pages) rather than items implement
:class:`eclaw.contracts.WatchesPages` (``subscriptions()``, as a watcher's): the crawl subscribes
them to its bus, and opens, checkpoints and closes them like any output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, runtime_checkable

from eclaw.security.redact import redact_url

if TYPE_CHECKING:
    from eclaw.contracts import ItemPipeline

__all__ = [
    "Compression",
    "Compressor",
    "Destination",
    "DestinationFactory",
    "Encoder",
    "FileFormat",
    "ItemDestinationFactory",
    "OutputOptions",
    "OutputSpec",
    "Rewinds",
    "Sink",
    "StreamFormat",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputSpec:
    """A parsed output spec (see the module's docstring for the syntax).

    Attributes:
        text: the spec as given.
        scheme: ``file``, ``stdout``, or the URL's scheme (``s3``, ``postgresql``...).
        location: a local path (``file``), ``-`` (``stdout``) or the URL without its query and
            ``:FORMAT``; its templates (``{spider}``, ``{run_key}``, ``{date}``, ``%(batch)05d``) unfilled.
        format: the format's name, or ``None`` for an item destination.
        compression: the compression's suffix name (``gz``, ``zst``, ``bz2``, ``xz``) or ``None``.
        options: the URL's query options (``?table=items&region=x``).
        explicit_format: the format was named with ``:FORMAT`` rather than found by suffix.
    """

    text: str
    scheme: str
    location: str
    format: str | None
    compression: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    explicit_format: bool = False

    @property
    def shown(self) -> str:
        """The spec as messages and records show it: a URL's password as ``***``."""
        return redact_url(self.text)

    @property
    def rotating(self) -> bool:
        """The location holds ``%(batch)d``: a new object every ``batch_items``/``batch_bytes``."""
        return "%(batch)" in self.location


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputOptions:
    """What the crawl's settings say of every output (``output_batch_items``...)."""

    run_key: str = "default"
    batch_items: int = 0
    batch_bytes: int = 0
    partition_by: tuple[str, ...] = ()
    item_key: tuple[str, ...] = ()


class Encoder(Protocol):
    """One output file's encoder (a :class:`StreamFormat` makes a fresh one per file)."""

    def header(self) -> bytes:
        """The bytes before the first item (``[`` for JSON; may be empty)."""

    def encode(self, row: dict[str, Any]) -> bytes:
        """One item's bytes (the item as a plain dict)."""

    def footer(self) -> bytes:
        """The bytes after the last item (``]`` for JSON; may be empty)."""

    def state(self) -> dict[str, Any]:
        """What a resumed run needs to continue the file: ``{"items": N, ...}`` (the items in this file,
        which rotation by ``batch_items`` reads, and anything else: CSV columns...)."""

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue a file from ``state()``'s value (the header is not written again)."""


@runtime_checkable
class StreamFormat(Protocol):
    """A format that turns items into bytes, streamed through a compression to any destination.

    ``name`` is its entry-point name; ``suffixes`` the file suffixes it claims (``(".jsonl", ".jl")``,
    lower case, a compressed suffix like ``.warc.gz`` allowed).
    """

    name: str
    suffixes: tuple[str, ...]

    def encoder(self, spec: OutputSpec) -> Encoder:
        """A fresh encoder for one file (``spec.options`` may configure it: ``?fields=a,b`` for CSV)."""


@runtime_checkable
class FileFormat(Protocol):
    """A format that owns a local file (SQLite, Parquet, WARC, markdown pages).

    ``make(path, spec, options)`` returns the output: an :class:`~eclaw.contracts.ItemPipeline` (or a
    :class:`~eclaw.contracts.WatchesPages`) with the lifecycle protocols it needs (``Opens``, ``Closes``,
    ``Resumable``) and a ``check(spider)`` that fails before the crawl with a ConfigError.
    ``path`` is the local file with templates unfilled (the spec's location, or a destination's
    staging path, uploaded at the end).
    """

    name: str
    suffixes: tuple[str, ...]

    def make(self, path: str, spec: OutputSpec, options: OutputOptions) -> Any: ...


@runtime_checkable
class Compression(Protocol):
    """A compression by suffix: each call of ``compressor()`` starts one member/frame; members
    concatenate into a valid file (gzip, bz2, xz, zstd all do)."""

    name: str

    def compressor(self) -> Compressor: ...

    def open_read(self, file: BinaryIO) -> BinaryIO:
        """The decompressed stream of a whole file (all its members), for reading back."""


class Compressor(Protocol):
    """One member being written: ``compress`` returns the bytes ready so far, ``flush`` closes the
    member and returns the rest."""

    def compress(self, data: bytes, /) -> bytes: ...

    def flush(self) -> bytes: ...


class Sink(Protocol):
    """Where one output file's bytes go: written at once into a local spool, made durable at checkpoints."""

    exactly_once: bool
    """False when a resumed run cannot take back what was sent (stdout, FTP): said in one line at start."""

    @property
    def size(self) -> int:
        """Bytes written so far (into the spool)."""

    def write(self, data: bytes) -> None:
        """Append ``data`` to the spool (synchronous, local; raises OSError on a full disk, leaving
        the spool as it was before the call)."""

    async def commit(self) -> dict[str, Any]:
        """A checkpoint: make what was written durable/delivered; the state a resume needs."""

    async def resume(self, saved: dict[str, Any]) -> None:
        """Continue a killed run from ``commit()``'s state, dropping whatever came after it."""

    async def finish(self) -> None:
        """Complete the object at the end of the crawl (or of a rotated batch)."""


@runtime_checkable
class Rewinds(Protocol):
    """A sink that can cut its spool back (a local file does): a compressed member that could not
    be written whole (disk full) is taken back, and its items dead-lettered."""

    def truncate(self, size: int) -> None:
        """Cut the spool back to its first ``size`` bytes."""


class Destination(Protocol):
    """A place bytes go (one per spec): local files, stdout, S3..."""

    def check(self, location: str) -> None:
        """Pre-flight before the crawl (``location``: templates filled): raise ConfigError with one
        clear line when unreachable, bad credentials, missing bucket, not writable."""

    def open(self, location: str, spool: Path) -> Sink:
        """A new object at ``location`` (templates filled), truncating what is there. ``spool`` is the local
        file the crawl gives this object's bytes until they are delivered (in its state directory with
        ``--state``; a destination that writes in place ignores it)."""

    def reopen(self, location: str, spool: Path) -> Sink:
        """The object at ``location``, to be continued with :meth:`Sink.resume` (``spool``: as for :meth:`open`,
        the same file the killed run was given)."""

    def remove(self, location: str) -> bool:
        """Remove an object a killed run began after its checkpoint (a rotated batch); whether one was there."""

    def staging_path(self, location: str) -> Path:
        """The local path a whole-file format writes for ``location`` (for a local destination: itself)."""

    async def upload(self, staged: Path, location: str) -> None:
        """Deliver a finished whole-file format's staged file to ``location`` (local: nothing to do)."""


@runtime_checkable
class DestinationFactory(Protocol):
    """What an ``eclaw.destinations`` entry point for bytes yields."""

    def make(self, spec: OutputSpec) -> Destination: ...


@runtime_checkable
class ItemDestinationFactory(Protocol):
    """What an ``eclaw.destinations`` entry point for items yields (``postgresql://…?table=NAME``): the whole
    output, an ItemPipeline with ``Opens``/``Closes``/``Resumable`` and ``check(spider)``."""

    def make_items(self, spec: OutputSpec, options: OutputOptions) -> ItemPipeline: ...
