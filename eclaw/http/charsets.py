"""A body's charset: the one its Content-Type or its document declares, else the one its bytes suggest.

UTF-8 is most of the web: a declaration of it is found without scanning the whole body, and an
undeclared body that decodes as UTF-8 is taken as such; the rest goes to w3lib's rules (BOM,
header, ``<meta>``, XML declaration), and charset-normalizer guesses where nothing is declared.
"""

from __future__ import annotations

from w3lib.encoding import html_body_declared_encoding, html_to_unicode, http_content_type_encoding

__all__ = ["BOMS", "declared_charset", "decoded"]

BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


def declared_charset(content_type: str, body: bytes) -> str | None:
    """The charset the ``content_type`` header, else the document ``body``, declares."""
    declared = http_content_type_encoding(content_type) if "charset" in content_type.lower() else None
    if declared is None:
        if _utf8_declared(body[:1024]):
            return "utf-8"  # by far the commonest declaration: skip the full scan
        head = body[:4096].lower()
        if _utf8_declared(head[:1024]):
            declared = "utf-8"
        elif b"charset" in head or b"encoding" in head:
            declared = html_body_declared_encoding(body)
    return declared


def decoded(content_type: str, body: bytes, declared: str | None) -> tuple[str, str]:
    """``(charset, text)`` of ``body``, given what :func:`declared_charset` found."""
    if not body.startswith(BOMS):
        if declared == "utf-8":
            return "utf-8", body.decode("utf-8", "replace")
        if declared is None:
            try:
                return "utf-8", body.decode("utf-8")
            except UnicodeDecodeError:
                pass
    return html_to_unicode(content_type, body, auto_detect_fun=_detect_encoding)


def _utf8_declared(start: bytes) -> bool:
    """``start`` declares UTF-8 (a form's ``accept-charset="utf-8"`` is not the page's charset)."""
    for needle in (b'charset="utf-8"', b"charset=utf-8", b'charset="UTF-8"'):
        at = start.find(needle)
        if at == 0 or (at > 0 and start[at - 1] != 0x2D):  # 0x2D: "-", as in accept-charset
            return True
    return False


def _detect_encoding(body: bytes) -> str | None:
    from charset_normalizer import from_bytes

    best = from_bytes(body[:65536]).best()
    return best.encoding if best is not None else None
