"""The built-in compressions, by suffix: ``gz`` (gzip), ``zst`` (zstandard), ``bz2``, ``xz``.

Registered as ``eclaw.compressions`` entry points. Each ``compressor()`` is one member (gzip, bz2,
xz) or frame (zstd); the stream writer closes one at every checkpoint, and a file of several
members reads back as one stream with the standard tools (``gzip -dc``, ``zstd -dc``...).
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib
from dataclasses import dataclass
from typing import Any, BinaryIO

from eclaw.exceptions import ConfigError
from eclaw.outputs.api import Compressor

__all__ = ["BZ2", "GZIP", "XZ", "ZSTD"]


class _Gzip:
    """A gzip member (the ``wbits=31`` zlib stream: header, deflate, trailer)."""

    def __init__(self) -> None:
        self._z = zlib.compressobj(6, zlib.DEFLATED, 31)

    def compress(self, data: bytes, /) -> bytes:
        return self._z.compress(data)

    def flush(self) -> bytes:
        return self._z.flush()


class _Zstd:
    """A zstd frame (``zstandard``, the maintained binding of the reference library)."""

    def __init__(self) -> None:
        import zstandard  # imported only when a .zst output is used

        self._z = zstandard.ZstdCompressor(level=3).compressobj()

    def compress(self, data: bytes, /) -> bytes:
        return self._z.compress(data)

    def flush(self) -> bytes:
        return self._z.flush()


@dataclass(frozen=True, slots=True)
class _Compression:
    name: str
    make: Any
    reader: Any

    def compressor(self) -> Compressor:
        return self.make()  # type: ignore[no-any-return]

    def open_read(self, file: BinaryIO) -> BinaryIO:
        return self.reader(file)  # type: ignore[no-any-return]


def _zstd_reader(file: BinaryIO) -> BinaryIO:
    try:
        import zstandard
    except ImportError:
        raise ConfigError("zstd outputs need the zstandard package: pip install 'eclaw[zstd]'") from None
    return zstandard.ZstdDecompressor().stream_reader(file, read_across_frames=True)


def _zstd() -> Compressor:
    try:
        return _Zstd()
    except ImportError:
        raise ConfigError("zstd outputs need the zstandard package: pip install 'eclaw[zstd]'") from None


GZIP = _Compression("gz", _Gzip, lambda file: gzip.GzipFile(fileobj=file, mode="rb"))
BZ2 = _Compression("bz2", lambda: bz2.BZ2Compressor(9), lambda file: bz2.BZ2File(file, "rb"))
XZ = _Compression("xz", lambda: lzma.LZMACompressor(lzma.FORMAT_XZ), lambda file: lzma.LZMAFile(file, "rb"))  # noqa: SIM115
ZSTD = _Compression("zst", _zstd, _zstd_reader)
