"""Telling text from binary bodies: by the Content-Type, and by the first bytes whatever it says.

Only text reaches a markup parser: a PDF whose text holds ``<a href=...>`` must not yield
links or items. A body is binary when its media type is one (``image/*``, ``audio/*``,
``video/*``, ``font/*``, ``application/pdf``, ``application/octet-stream``, archives...),
or when its first bytes are a known binary signature (PDF, PNG, JPEG, GIF, ZIP, gzip...)
even under a text type, or, with no Content-Type, when they hold a NUL byte.
"""

from __future__ import annotations

__all__ = ["binary_kind"]

# Signatures at the start of the body that no text page starts with (from the WHATWG MIME sniffing table).
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "PDF"),
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"PK\x03\x04", "ZIP"),
    (b"PK\x05\x06", "ZIP"),
    (b"\x1f\x8b\x08", "gzip"),
    (b"\x00\x00\x01\x00", "ICO"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"Rar!\x1a\x07", "RAR"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"OggS\x00", "Ogg"),
    (b"\x1a\x45\xdf\xa3", "WebM"),
)
_PREFIXES = tuple(magic for magic, _ in _MAGIC)
_BINARY_TOPS = ("image/", "audio/", "video/", "font/", "model/")
_TEXT_SUFFIXES = ("+xml", "+json", "/xml", "/json", "javascript", "ecmascript")
_TEXT_APPLICATIONS = frozenset(
    {"application/x-www-form-urlencoded", "application/x-ndjson", "application/jsonl", "application/csv"}
)


def binary_kind(content_type: str, body: bytes) -> str | None:
    """Why ``body`` is binary, or ``None`` for text: its binary media type (``"application/pdf"``),
    or what its bytes are (``"PDF bytes"``, ``"PNG bytes under Content-Type text/html"``)."""
    media = content_type.partition(";")[0].strip().lower()
    text = media.startswith("text/") or media.endswith(_TEXT_SUFFIXES) or media in _TEXT_APPLICATIONS
    if media and not text and media.startswith((*_BINARY_TOPS, "application/")):
        return media
    sniffed = _sniffed(body)
    if sniffed is not None:
        return f"{sniffed} bytes under Content-Type {media}" if media else f"{sniffed} bytes"
    if not media and b"\x00" in body[:1024]:
        return "binary bytes, no Content-Type"
    return None


def _sniffed(body: bytes) -> str | None:
    if body.startswith(_PREFIXES):
        for magic, name in _MAGIC:
            if body.startswith(magic):
                return name
    if body.startswith(b"RIFF") and body[8:12] in (b"WEBP", b"AVI "):
        return "WebP" if body[8:12] == b"WEBP" else "AVI"
    if body[4:8] == b"ftyp":
        return "MP4"
    return None
