"""Duplicate filters: remember request fingerprints in bounded or exact memory."""

from __future__ import annotations

import io
from typing import BinaryIO

from pybloom_live import ScalableBloomFilter

from eclaw.http import Request

__all__ = ["BloomDupeFilter", "RecentSet", "SetDupeFilter", "recent_key"]


class BloomDupeFilter:
    """Scalable Bloom filter (pybloom-live): about 1.8 MB per million URLs at
    0.1 % false positives, growing past ``capacity``.

    A false positive drops a new URL as a duplicate: keep ``error_rate`` low.
    """

    def __init__(self, capacity: int = 1_000_000, error_rate: float = 0.001) -> None:
        self._bloom = ScalableBloomFilter(initial_capacity=capacity, error_rate=error_rate)
        self._count = 0

    def add(self, fp: bytes) -> bool:
        # ScalableBloomFilter.add returns True when the key was (probably) present. It hashes
        # the key twice (test, then set); while there is one filter with room, one pass does both.
        filters = self._bloom.filters
        if len(filters) == 1 and filters[0].count < filters[0].capacity:
            present = filters[0].add(fp)
        else:
            present = self._bloom.add(fp)
        if present:
            return False
        self._count += 1
        return True

    def __len__(self) -> int:
        return self._count

    def dump(self, file: BinaryIO) -> None:
        """Write the filter to ``file`` (pybloom-live's format, then the count)."""
        self._bloom.tofile(file)
        file.seek(0, io.SEEK_END)  # tofile leaves the position at its header
        file.write(self._count.to_bytes(8, "little"))

    def load(self, file: BinaryIO) -> None:
        """Replace the filter with one written by :meth:`dump`."""
        self._bloom = ScalableBloomFilter.fromfile(file)
        self._count = int.from_bytes(file.read(8), "little")

    def __repr__(self) -> str:
        return f"BloomDupeFilter(seen={self._count})"


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
