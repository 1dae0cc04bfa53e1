"""The files through which the processes of one crawl (``--processes N``) hand each other links.

Every process owns a part of the crawl's URLs and appends the requests it found for
another process's part to a file of its own for that process (``A-B.jsonl``, a
request a line: a plain link as tab-separated fields, any other as its JSON record,
see :func:`~eclaw.frontier.serial.to_line`); the other reads it as it grows. The files are the only
channel, so they are also what makes a saved crawl (``--state``) exact: each
process's checkpoint records how long each of its files was (its outbox) and how
far it had read each file it reads (its inbox). On resume a process cuts its
outbox back to the saved length (the links after it are found again when their
pages are crawled again) and writes that length to ``A-B.base``; the reader starts
again from the lesser of where it had saved reading and that base, so it reads
again what it had not saved, and never skips a link written afresh.

A process with nothing left to do may be lent requests by a busy one (see
:class:`~eclaw.frontier.partition.PartFrontier`): they come in the same file, each line
marked with :data:`LENT`. The lender has forgotten them, and its saved state must say so
before the borrower may take them, or a crash of the lender would see them crawled twice:
each lent line is read only once it is within ``A-B.commit``, the length the lender's last
checkpoint on disk holds (without ``--state``, the file's length as soon as it is written).
A request the reader's dupe filter lets through (``dont_filter``: a start URL, a retry of a
lent request going back to its owner) is held so too, marked :data:`HELD`: read before the writer's
checkpoint, it would be fetched and stored there, and again by the writer resumed from a
checkpoint that still holds it (its line cut off the file), a page's item written twice.

Also in the directory: ``status-K.json`` (is process K idle, and how far has it read),
``end`` (written by the parent once every process is idle and every file read to its
end), ``stats-K.json`` (each process's stats when it is done) and ``count``.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["HELD", "LENT", "Mesh", "mesh_files", "read_status", "unread"]

_READ_MAX = 4 << 20  # bytes of one inbox file read at once, at most
LENT = b"="  # the start of the line of a request lent to the reader (no URL and no JSON record starts so)
HELD = b"!"  # the start of the line of a request the reader does not deduplicate, read once committed
_GATED = (LENT, HELD)  # lines read only within the writer's commit


def mesh_files(directory: Path, count: int) -> list[tuple[int, int, Path]]:
    """Every (writer, reader, file) of a crawl on ``count`` processes."""
    return [(a, b, directory / f"{a}-{b}.jsonl") for a in range(count) for b in range(count) if a != b]


class Mesh:
    """Process ``part``'s end of the files of a crawl on ``count`` processes in ``directory``."""

    def __init__(self, directory: Path, part: int, count: int) -> None:
        self.directory, self.part, self.count = directory, part, count
        self.peers = [p for p in range(count) if p != part]
        self._out: dict[int, int] = {}  # peer -> file descriptor of the file this process writes for it
        self._sent: dict[int, int] = dict.fromkeys(self.peers, 0)  # bytes written to each peer's file
        self._read: dict[int, int] = dict.fromkeys(self.peers, 0)  # bytes of each peer's file taken in
        self._based: set[int] = set()  # peers whose base for this run is known (their file may be read)
        self._saved: dict[str, Any] | None = None
        self._said: dict[str, Any] | None = None
        self._committed: dict[int, int] = {}  # peer -> the length of its file whose lent/held lines may be read
        self._blocked: dict[int, tuple[int, int]] = {}  # peer -> (start, end) of a gated line not committed yet

    def _path(self, writer: int, reader: int, suffix: str = ".jsonl") -> Path:
        return self.directory / f"{writer}-{reader}{suffix}"

    # -- what a checkpoint saves (the frontier's Resumable side) ---------------------------

    def checkpoint(self) -> dict[str, Any]:
        return {"sent": dict(self._sent), "read": dict(self._read)}

    def restore(self, saved: dict[str, Any]) -> None:
        self._saved = saved

    def flush(self) -> None:
        for fd in self._out.values():
            os.fsync(fd)

    # -- life cycle --------------------------------------------------------------------

    def open(self) -> None:
        """Open the outbox files, cut back to the saved lengths (empty for a new crawl), and say so."""
        saved = self._saved or {}
        sent = {int(k): v for k, v in saved.get("sent", {}).items()}
        read = {int(k): v for k, v in saved.get("read", {}).items()}
        for peer in self.peers:
            path = self._path(self.part, peer)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            length = min(sent.get(peer, 0), os.fstat(fd).st_size)
            os.ftruncate(fd, length)
            self._out[peer], self._sent[peer] = fd, length
            self._read[peer] = read.get(peer, 0)
            self.commit(peer, length)  # all of it is in the saved state: before the base lets it be read
            _write_atomically(self._path(self.part, peer, ".base"), str(length))

    def close(self) -> None:
        """Close the outbox files, and say how far this process read the others' (what it leaves unread)."""
        for fd in self._out.values():
            os.close(fd)
        self._out.clear()
        self._tell({"idle": False, "read": self._positions(), "closed": True})

    # -- links out and in ---------------------------------------------------------------

    def send(self, peer: int, lines: list[bytes]) -> None:
        """Append records (each ending in a newline) to ``peer``'s file."""
        data = b"".join(lines)
        os.write(self._out[peer], data)
        self._sent[peer] += len(data)

    def sent(self, peer: int) -> int:
        """The length of ``peer``'s file so far."""
        return self._sent[peer]

    def commit(self, peer: int, length: int) -> None:
        """The lent and held lines of ``peer``'s file up to ``length`` may be read: this process's saved
        state holds them as sent."""
        _write_atomically(self._path(self.part, peer, ".commit"), str(length))

    def arrivals(self) -> dict[int, tuple[list[bytes], int]]:
        """What each peer wrote since it was last read: its whole lines, and where reading them ends.
        The caller takes them in, then calls :meth:`taken` (a checkpoint saves only what was taken)."""
        found: dict[int, tuple[list[bytes], int]] = {}
        for peer in self.peers:
            if peer not in self._based and not self._learn_base(peer):
                continue
            start = self._read[peer]
            blocked = self._blocked.get(peer)
            if blocked and blocked[0] == start and self._commit_of(peer) < blocked[1]:
                continue  # waiting for its lender's checkpoint: nothing to read before it
            path = self._path(peer, self.part)
            try:
                if os.stat(path).st_size <= start:
                    continue
                with path.open("rb") as file:
                    file.seek(start)
                    data = file.read(_READ_MAX)
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n") + 1  # a line being written is read once it is whole
            if end and _gates(data[:end]):
                end = self._committed_end(peer, data[:end], start)
            if end:
                found[peer] = (data[: end - 1].split(b"\n"), start + end)  # a line's bytes: its length + 1
        return found

    def _committed_end(self, peer: int, data: bytes, start: int) -> int:
        """Where the lines of ``data`` (read from ``start``) that may be taken now end: before the first
        lent or held line past the writer's commit."""
        committed = self._committed.get(peer, 0)
        if start + len(data) > committed:
            committed = self._commit_of(peer)
        if start + len(data) <= committed:
            return len(data)
        position = 0
        for line in data[:-1].split(b"\n"):  # whole lines: ``data`` ends with a newline
            size = len(line) + 1
            if line[:1] in _GATED and start + position + size > committed:
                self._blocked[peer] = (start + position, start + position + size)
                break
            position += size
        return position

    def _commit_of(self, peer: int) -> int:
        """How much of ``peer``'s file its lender's last checkpoint on disk holds (read again now)."""
        with contextlib.suppress(FileNotFoundError, ValueError):
            self._committed[peer] = int(self._path(peer, self.part, ".commit").read_text())
        return self._committed.get(peer, 0)

    def taken(self, peer: int, position: int) -> None:
        self._read[peer] = position

    def _learn_base(self, peer: int) -> bool:
        """The peer's file for this process may be read once the peer has cut it back for this run."""
        try:
            base = int(self._path(peer, self.part, ".base").read_text())
        except (FileNotFoundError, ValueError):
            return False
        self._read[peer] = min(self._read[peer], base)
        self._based.add(peer)
        return True

    # -- telling the parent ---------------------------------------------------------------

    def say(self, *, idle: bool) -> None:
        """Tell the parent whether this process is idle (and how far it has read every file)."""
        if not idle and self._said is not None and not self._said["idle"]:
            return  # busy, and said so: nothing to write (the common case, while it crawls)
        ready = len(self._based) == len(self.peers)  # it reads every file
        status = {"idle": idle and ready, "read": self._positions()}
        if status != self._said:
            self._tell(status)

    def _positions(self) -> dict[str, int]:
        return {str(peer): self._read[peer] for peer in self.peers}

    def _tell(self, status: dict[str, Any]) -> None:
        self._said = status
        _write_atomically(self.directory / f"status-{self.part}.json", json.dumps(status))

    def ended(self) -> bool:
        return (self.directory / "end").exists()


def _gates(data: bytes) -> bool:
    """Whether a line of ``data`` (whole lines) waits for its writer's commit (lent, or held)."""
    return any(data.startswith(mark) or b"\n" + mark in data for mark in _GATED)


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def unread(directory: Path, count: int) -> int:
    """How many requests sent from one process to another were never read (a crawl stopped before its
    end: they are pending), by where each reader said it stopped reading when it closed; none for a
    reader that did not close (it died: how far it read is not known)."""
    lines = 0
    for writer, reader, path in mesh_files(directory, count):
        status = read_status(directory, reader)
        if status is None or not status.get("closed"):
            continue
        with contextlib.suppress(FileNotFoundError), path.open("rb") as file:
            file.seek(status["read"].get(str(writer), 0))
            for chunk in iter(lambda: file.read(1 << 20), b""):
                lines += chunk.count(b"\n")
    return lines


def read_status(directory: Path, part: int) -> dict[str, Any] | None:
    with contextlib.suppress(FileNotFoundError, ValueError):
        return dict(json.loads((directory / f"status-{part}.json").read_text()))
    return None
