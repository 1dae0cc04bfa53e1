"""The local spool of a remote destination's sink: bytes written at once, kept until delivered."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from eclaw.exceptions import ConfigError
from eclaw.security.redact import redact_url

__all__ = ["PART_SIZE", "PartedSpool", "Spool", "spool_path", "staging_file"]

logger = logging.getLogger(__name__)

PART_SIZE = 5 * 1024 * 1024  # the bytes a checkpoint waits for before it sends them as one part (S3's least)


def _name(location: str) -> str:
    return hashlib.sha256(location.encode()).hexdigest()[:32]


def spool_path(location: str, state: Path | None, run_id: str) -> Path:
    """The local file that keeps the bytes for ``location`` until delivered: in the crawl's state
    directory ``state`` (``spool/``) when it has one, so a resumed run finds it (a reboot that empties the
    temporary directory included) and two crawls never share one; else a folder of this run's own under
    the system's temporary directory."""
    folder = state / "spool" if state is not None else Path(tempfile.gettempdir()) / "eclaw-spool" / run_id
    return folder / _name(location)


def staging_file(location: str) -> Path:
    """Where a whole-file format for remote ``location`` is written before its upload (this process's own)."""
    return Path(tempfile.gettempdir()) / "eclaw-spool" / f"{_name(location)}-{os.getpid()}.staged"


class Spool:
    """A sink's local file (``location`` is where its bytes go in the end): written through, fsynced at a
    checkpoint, cut back to a saved size on resume."""

    def __init__(self, location: str, spool: Path, *, truncate: bool) -> None:
        self.location, self.spool = location, spool
        spool.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if truncate else 0)
        self._fd: int | None = os.open(spool, flags, 0o600)
        self._size = 0 if truncate else os.fstat(self._fd).st_size

    @property
    def size(self) -> int:
        return self._size

    @property
    def shown(self) -> str:
        return redact_url(self.location)

    def write(self, data: bytes) -> None:
        assert self._fd is not None, "sink closed"
        try:
            os.pwrite(self._fd, data, self._size)
        except OSError:
            os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)

    async def _sync(self) -> None:
        assert self._fd is not None, "sink closed"
        await asyncio.to_thread(os.fsync, self._fd)

    def _cut_back(self, size: int) -> None:
        """Resume at ``size`` bytes (a checkpoint's): what a killed run wrote after it is dropped."""
        assert self._fd is not None, "sink closed"
        if os.fstat(self._fd).st_size < size:
            raise ConfigError(f"output {self.shown}: its spool {self.spool} is shorter than the saved crawl wrote;"
                              " remove the state directory to start over")  # fmt: skip
        os.ftruncate(self._fd, size)
        self._size = size


class PartedSpool(Spool, ABC):
    """A spool delivered in parts of at least :data:`PART_SIZE` bytes, one at a checkpoint when there are
    enough (S3's multipart upload, GCS's composed objects): what each destination sends its own way."""

    part_size = PART_SIZE

    def __init__(self, location: str, spool: Path, *, truncate: bool) -> None:
        super().__init__(location, spool, truncate=truncate)
        self._sent = 0  # spool bytes already in parts

    def _read(self, start: int, end: int) -> bytes:
        assert self._fd is not None, "sink closed"
        return os.pread(self._fd, end - start, start)

    async def commit(self) -> dict[str, Any]:
        """At a checkpoint: the spool made durable, the bytes not yet sent sent as a part if there are
        enough of them (if the destination fails, they wait in the spool); what to save to resume."""
        await self._sync()
        if self._size - self._sent >= self.part_size:
            try:
                await self._send_part(self._size)
            except OSError as error:  # kept in the (fsynced) spool: the next commit or a resumed run sends it
                logger.warning("%s; %d bytes kept in the spool for the next checkpoint", error, self._size - self._sent)
        return self._state()

    @abstractmethod
    async def _send_part(self, end: int) -> None:
        """Send the spool's bytes from ``_sent`` to ``end`` as one part (OSError: the destination failed)."""

    @abstractmethod
    def _state(self) -> dict[str, Any]:
        """What a resumed run needs to go on (saved with the checkpoint)."""
