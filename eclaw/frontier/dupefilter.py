"""Duplicate filters: remember request fingerprints in bounded or exact memory."""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable
from typing import BinaryIO

from rbloom import Bloom

from eclaw.http import Request

__all__ = ["BloomDupeFilter", "RecentSet", "SetDupeFilter", "recent_key"]


def _stable_hash(fp: bytes, _from_bytes: Callable[..., int] = int.from_bytes) -> int:
    """A fingerprint is already a digest: its first 16 bytes are the hash, the same in every process
    (Python's own ``hash`` of bytes changes per process, and a saved filter must outlive it)."""
    return _from_bytes(fp[:16], "big", signed=True)


# The stages hold that hash itself, their hash function taking it as it is: a call of C, not of Python, per
# stage asked (the bits are those a stage hashing the fingerprints with _stable_hash sets: saved filters load).
_HASHED = operator.index
_from_bytes = int.from_bytes


class BloomDupeFilter:
    """Scalable Bloom filter (rbloom, in Rust): about 3.8 MB per million URLs at one
    false positive in a million, growing past ``capacity``.

    It grows in stages: when a stage holds the URLs it was sized for, a new one twice its
    size opens, with half its false-positive rate, so the rates of all stages sum to at most
    ``error_rate``. A false positive drops a new URL as a duplicate: keep ``error_rate`` low.
    """

    _MAGIC = b"eclaw-bloom-1\n"

    def __init__(self, capacity: int = 1_000_000, error_rate: float = 0.001) -> None:
        self._capacity = capacity
        self._error_rate = error_rate
        self._stages: list[tuple[Bloom, int]] = []  # (filter, URLs it was sized for)
        self._count = 0
        self._room = 0  # URLs the newest stage may still take
        self._grow()

    def _grow(self) -> None:
        size = self._capacity << len(self._stages)
        rate = self._error_rate / (2 << len(self._stages))
        self._stages.append((Bloom(size, rate, _HASHED), size))
        self._room = size

    def add(self, fp: bytes) -> bool:
        """Remember ``fp``; whether it was new (``False``: seen before, or a false positive)."""
        key = _from_bytes(fp[:16], "big", signed=True)  # _stable_hash(fp), without its call
        for stage, _ in self._stages:
            if key in stage:
                return False
        if not self._room:
            self._grow()
        self._stages[-1][0].add(key)
        self._room -= 1
        self._count += 1
        return True

    def __len__(self) -> int:
        return self._count

    @property
    def nbytes(self) -> int:
        """Memory of the filter's bits."""
        return sum(stage.size_in_bits // 8 for stage, _ in self._stages)

    def dump(self, file: BinaryIO) -> None:
        """Write the filter to ``file``: a header, the count, then each stage (its size and rbloom's bytes)."""
        file.write(self._MAGIC + struct.pack("<QQdI", self._count, self._room, self._error_rate, len(self._stages)))
        for stage, size in self._stages:
            data = stage.save_bytes()
            file.write(struct.pack("<QQ", size, len(data)) + data)

    def load(self, file: BinaryIO) -> None:
        """Replace the filter with one written by :meth:`dump` (``ValueError`` if it is not one)."""
        if file.read(len(self._MAGIC)) != self._MAGIC:
            raise ValueError("not a duplicate filter of this eclaw version (start a new --state folder)")
        count, room, rate, stages = struct.unpack("<QQdI", file.read(struct.calcsize("<QQdI")))
        loaded = []
        for _ in range(stages):
            size, length = struct.unpack("<QQ", file.read(16))
            data = file.read(length)
            if len(data) != length:
                raise ValueError("duplicate filter cut short")
            loaded.append((Bloom.load_bytes(data, _HASHED), size))
        self._stages, self._count, self._room, self._error_rate = loaded, count, room, rate
        self._capacity = loaded[0][1] if loaded else self._capacity

    def __repr__(self) -> str:
        return f"BloomDupeFilter(seen={self._count}, stages={len(self._stages)})"


class SetDupeFilter:
    """Exact set of fingerprints: no false positives, ~100 bytes per URL."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()

    def add(self, fp: bytes) -> bool:
        before = len(self._seen)
        self._seen.add(fp)
        return len(self._seen) != before

    def __len__(self) -> int:
        return len(self._seen)

    def dump(self, file: BinaryIO) -> None:
        """Write the fingerprints to ``file`` (each after its length)."""
        for fp in self._seen:
            file.write(len(fp).to_bytes(1, "little") + fp)

    def load(self, file: BinaryIO) -> None:
        """Replace the set with one written by :meth:`dump`."""
        seen, data, at = set(), file.read(), 0
        while at < len(data):
            size = data[at]
            seen.add(data[at + 1 : at + 1 + size])
            at += 1 + size
        self._seen = seen

    def __repr__(self) -> str:
        return f"SetDupeFilter(seen={len(self._seen)})"


class RecentSet:
    """Exact membership for the most recent keys, in bounded memory: two
    generations (``new``, ``old``) of at most ``size`` keys; the older is
    dropped when the newer fills. Hot loops test ``key in s.new or key in s.old``.
    """

    __slots__ = ("new", "old", "size")

    def __init__(self, size: int = 32768) -> None:
        self.size = size
        self.new: set[str] = set()
        self.old: set[str] = set()

    def __contains__(self, key: str) -> bool:
        return key in self.new or key in self.old

    def add(self, key: str) -> None:
        if len(self.new) >= self.size:
            self.old, self.new = self.new, set()
        self.new.add(key)


def recent_key(request: Request) -> str | None:
    """What a :class:`RecentSet` knows ``request`` by: its URL (fragment aside) for a plain GET,
    ``None`` when a URL alone does not tell it apart (a body, ``dont_filter``, its own cookie jar)."""
    meta = request._meta
    if request.method != "GET" or request.body or request.dont_filter or (meta and "cookiejar" in meta):
        return None
    return request.url.partition("#")[0]
