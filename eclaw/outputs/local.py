"""The built-in byte destinations: local files (bare paths, ``file://``) and stdout (``-``).

A local file is its own spool: bytes are written through at once, a commit is an ``fsync`` and
the offset reached; a resume truncates the file back to the saved offset. Stdout cannot take back
what it printed: a resumed crawl prints the items after the last checkpoint again
(``exactly_once = False``, said at start).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from eclaw.exceptions import ConfigError
from eclaw.outputs.api import Destination, OutputSpec, Sink

__all__ = ["FILES", "STDOUT", "LocalFiles", "LocalSink", "Stdout"]


class LocalSink:
    """A local file, written through (the spool is the file)."""

    exactly_once = True

    def __init__(self, path: Path, *, truncate: bool) -> None:
        self.path = path
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else 0)
        self._fd: int | None = os.open(path, flags, 0o644)
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def write(self, data: bytes) -> None:
        assert self._fd is not None, "sink closed"
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            try:  # undo the partial write: the file ends where it did
                os.ftruncate(self._fd, self._size)
                os.lseek(self._fd, self._size, os.SEEK_SET)
            except OSError:
                pass
            raise
        self._size += len(data)

    def truncate(self, size: int) -> None:
        assert self._fd is not None, "sink closed"
        os.ftruncate(self._fd, size)
        os.lseek(self._fd, size, os.SEEK_SET)
        self._size = size

    async def commit(self) -> dict[str, Any]:
        if self._fd is not None:
            os.fsync(self._fd)
        return {"offset": self._size}

    async def resume(self, saved: dict[str, Any]) -> None:
        assert self._fd is not None, "sink closed"
        offset = int(saved["offset"])
        size = os.fstat(self._fd).st_size
        if size < offset:
            raise ConfigError(
                f"output {self.path} is shorter than the saved crawl wrote ({size} < {offset} bytes):"
                " it was changed; remove the state directory to start over"
            )
        os.ftruncate(self._fd, offset)  # what came after the checkpoint is written again
        os.lseek(self._fd, offset, os.SEEK_SET)
        self._size = offset

    async def finish(self) -> None:
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None


class LocalFiles:
    """Local paths: checked writable before the crawl."""

    def check(self, location: str) -> None:
        path = Path(location)
        if not path.parent.is_dir():
            raise ConfigError(f"output directory does not exist: {path.parent} (for {path})")
        if path.is_dir():
            raise ConfigError(f"output path is a directory: {path}")
        if not os.access(path.parent, os.W_OK):
            raise ConfigError(f"output directory is not writable: {path.parent} (for {path})")

    def open(self, location: str, spool: Path) -> Sink:
        self.check(location)
        return LocalSink(Path(location), truncate=True)

    def reopen(self, location: str, spool: Path) -> Sink:
        path = Path(location)
        if not path.is_file():
            raise ConfigError(f"output {path} of the saved crawl is gone; remove the state directory to start over")
        return LocalSink(path, truncate=False)

    def remove(self, location: str) -> bool:
        path = Path(location)
        if path.is_file():
            path.unlink()
            return True
        return False

    def staging_path(self, location: str) -> Path:
        return Path(location)

    async def upload(self, staged: Path, location: str) -> None:
        return None  # written in place


class _StdoutSink:
    """The process's stdout (items only: every log line goes to stderr)."""

    exactly_once = False

    def __init__(self) -> None:
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def write(self, data: bytes) -> None:
        sys.stdout.buffer.write(data)
        self._size += len(data)

    async def commit(self) -> dict[str, Any]:
        sys.stdout.buffer.flush()
        return {"offset": self._size}

    async def resume(self, saved: dict[str, Any]) -> None:
        self._size = int(saved["offset"])  # printed already: cannot be taken back

    async def finish(self) -> None:
        sys.stdout.buffer.flush()


class Stdout:
    """``-``: the items on stdout."""

    def check(self, location: str) -> None:
        return None

    def open(self, location: str, spool: Path) -> Sink:
        return _StdoutSink()

    def reopen(self, location: str, spool: Path) -> Sink:
        return _StdoutSink()

    def remove(self, location: str) -> bool:
        return False

    def staging_path(self, location: str) -> Path:
        raise ConfigError("stdout takes stream formats only (jsonl, json, csv), not a whole-file format")

    async def upload(self, staged: Path, location: str) -> None:
        return None


class _Factory:
    def __init__(self, destination: Destination) -> None:
        self._destination = destination

    def make(self, spec: OutputSpec) -> Destination:
        return self._destination


FILES = _Factory(LocalFiles())
STDOUT = _Factory(Stdout())
