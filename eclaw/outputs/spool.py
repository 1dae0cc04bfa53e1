"""The local spool of a remote destination's sink: bytes written at once, kept until delivered."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from eclaw.exceptions import ConfigError
from eclaw.security.redact import redact_url

__all__ = ["Spool"]


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
