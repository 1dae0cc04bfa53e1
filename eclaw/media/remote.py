"""A files store at a destination URI (``s3://bucket/prefix``, ``ftp://host/dir``, a plug-in's scheme).

``files_store`` names a local directory (a path or ``file://``) or any byte destination of the
outputs registry (:data:`eclaw.outputs.registry.DESTINATIONS`, entry points ``eclaw.destinations``):
the destination's own :meth:`~eclaw.outputs.api.Destination.check` runs before the crawl and its
:meth:`~eclaw.outputs.api.Destination.upload` delivers each file to ``{uri}/{relative path}``.

A remote store keeps a local folder (under the crawl's ``state_dir``, else ``eclaw-data/{spider}``):
bodies are streamed to ``tmp/`` there, renamed to their content address and listed in the
**outbox** (a table of the store's local index, ``index.sqlite``) in one step, then uploaded; once
delivered, the local copy is removed and the outbox entry with it. An upload that fails leaves the
file and its entry: the item lists the file as ``failed`` with the reason, and the next run
delivers every file still in the outbox when it opens the store. After a SIGKILL nothing is lost
nor doubled: a file renamed but not yet listed is an orphan removed at open (its URL was not
indexed, so it is fetched again), and a file sent but not yet struck off is sent again to the same
content address (the same bytes, one object).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import sqlite3
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from eclaw.exceptions import ConfigError
from eclaw.outputs.api import Destination, DestinationFactory, OutputSpec
from eclaw.outputs.registry import DESTINATIONS
from eclaw.security.redact import redact_url

__all__ = ["DeliveryFailed", "Outbox", "local_root", "outbox_for"]

logger = logging.getLogger(__name__)

_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")  # two letters at least: not a Windows drive
_KEPT = ("full", "thumbs")  # the store's folders of placed files


class DeliveryFailed(Exception):
    """A file could not be uploaded to the store's destination: the reason is the message."""


class Outbox:
    """The files of a remote store on their way from its local folder to ``uri``."""

    def __init__(self, uri: str, destination: Destination) -> None:
        self.uri = uri.rstrip("/")
        self.shown = redact_url(self.uri)
        self._destination = destination
        self._db: sqlite3.Connection | None = None
        self._root = Path()
        self._sending: dict[str, asyncio.Task[None]] = {}

    def __repr__(self) -> str:
        return f"Outbox({self.shown!r})"

    def location(self, relative: str) -> str:
        """Where the file ``relative`` (to the store's root) goes: ``{uri}/{relative}``."""
        return f"{self.uri}/{relative}"

    async def check(self) -> None:
        """Pre-flight before the crawl: the destination's own check (ConfigError: one line)."""
        probe = self.location("eclaw-check")
        try:
            self._destination.staging_path(probe)  # stdout takes no whole file: a ConfigError, as for a format
            await asyncio.to_thread(self._destination.check, probe)
        except ConfigError as exc:  # "output s3://b/eclaw-check: the bucket does not exist": the reason alone
            reason = str(exc).removeprefix(f"output {redact_url(probe)}: ")
            raise ConfigError(f"files_store {self.shown}: {reason}") from None

    async def open(self, db: sqlite3.Connection, root: Path) -> None:
        """Drop the orphans of a killed run and deliver what a past run left (after :meth:`check`)."""
        self._db, self._root = db, root
        db.execute("CREATE TABLE IF NOT EXISTS outbox (path TEXT PRIMARY KEY)")
        listed = self.pending()
        for folder in _KEPT:
            for path in (root / folder).rglob("*"):
                if path.is_file() and path.relative_to(root).as_posix() not in listed:
                    path.unlink()  # renamed by a killed run before it was listed: its URL is fetched again
        for relative in listed:
            if not (root / relative).is_file():  # removed by hand: its URLs are fetched again
                db.execute("DELETE FROM files WHERE path = ?", (relative,))
                db.execute("DELETE FROM outbox WHERE path = ?", (relative,))
        await self.flush()

    def pending(self) -> set[str]:
        """The files not delivered yet (relative paths)."""
        return {row[0] for row in self._index().execute("SELECT path FROM outbox")}

    def holds(self, relative: str) -> bool:
        """Whether ``relative`` is still waiting to be delivered."""
        return self._index().execute("SELECT 1 FROM outbox WHERE path = ?", (relative,)).fetchone() is not None

    def add(self, relative: str) -> None:
        """List the placed file ``relative`` (inside the caller's transaction)."""
        self._index().execute("INSERT OR IGNORE INTO outbox VALUES (?)", (relative,))

    async def send(self, relative: str) -> None:
        """Deliver the listed file ``relative``; the same file being sent already is awaited, not sent twice.

        Raises:
            DeliveryFailed: the destination refused it or cannot be reached; the file stays listed.
        """
        task = self._sending.get(relative)
        if task is None:
            task = self._sending[relative] = asyncio.ensure_future(self._upload(relative))
            task.add_done_callback(self._sent)
        await asyncio.shield(task)

    def _sent(self, task: asyncio.Task[None]) -> None:
        """An upload ended: off the list of those under way (its failure is read: each waiter has it raised)."""
        self._sending = {path: other for path, other in self._sending.items() if other is not task}
        if not task.cancelled():
            task.exception()

    async def flush(self) -> int:
        """Send every listed file; how many are still waiting (each logged with its reason)."""
        waiting = 0
        for relative in sorted(self.pending()):
            try:
                await self.send(relative)
            except DeliveryFailed as exc:
                logger.warning("files_store %s: %s kept for the next run: %s", self.shown, relative, exc)
                waiting += 1
        return waiting

    async def _upload(self, relative: str) -> None:
        location = self.location(relative)
        try:
            await self._destination.upload(self._root / relative, location)
        except (OSError, ConfigError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DeliveryFailed(reason.removeprefix(f"output {redact_url(location)}: ")) from None
        self._index().execute("DELETE FROM outbox WHERE path = ?", (relative,))
        local = self._root / relative
        local.unlink(missing_ok=True)  # a crash before this: an orphan, removed at open
        with contextlib.suppress(OSError):  # full/ab/ emptied: not left behind (refilled by the next file)
            local.parent.rmdir()

    def _index(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("files outbox is not open")
        return self._db


def outbox_for(store: str) -> Outbox | None:
    """The outbox of ``files_store``'s destination when it is a URI (not a local path nor ``file://``).

    Raises:
        ConfigError: an unknown scheme, or one that takes items rather than bytes (``postgresql://``).
    """
    match = _URL.match(store)
    if match is None or match.group(1).lower() == "file":
        return None
    scheme = match.group(1).lower()
    try:
        factory = DESTINATIONS.get(scheme)
    except ConfigError as exc:
        raise ConfigError(f"setting 'files_store': {exc}") from None
    if not isinstance(factory, DestinationFactory):
        raise ConfigError(f"setting 'files_store': {scheme}:// takes items, not files")
    parts = urlsplit(store)
    location = parts._replace(query="", fragment="").geturl()
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    spec = OutputSpec(text=store, scheme=scheme, location=location, format=None, options=options)
    return Outbox(location, factory.make(spec))


def local_root(store: str, spider: str, state_dir: str | Path | None) -> Path:
    """The local folder of ``files_store``: itself for a path or ``file://``; for a URI, a folder
    named after it in ``state_dir`` (else in ``eclaw-data/{spider}``). Absolute, fixed when the crawl
    starts: a later change of the process's working directory moves nothing."""
    if _URL.match(store) is None:
        return Path(store).absolute()
    if store.lower().startswith("file://"):
        return Path(unquote(urlsplit(store).path)).absolute()
    base = Path(state_dir) if state_dir else Path("eclaw-data") / spider
    name = hashlib.sha256(redact_url(store).encode()).hexdigest()[:16]
    return (base / f"files-{name}").absolute()
