"""Only text is parsed as markup: real PDF, PNG and JPEG files whose bytes hold markup-looking text,
served with and without extensions and with no Content-Type at all, never yield items or links."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from eclaw import Response, Spider
from eclaw.exceptions import NotTextResponse
from eclaw.testing import collect
from tests.conftest import assert_accounted
from tests.rawsite import RawSite

MARKUP = '<html><body><a href="/secret/{kind}">more</a><div class="price">9.99</div></body></html>'
JPEG = (Path(__file__).parent / "data" / "binary" / "photo.jpg").read_bytes()  # a real JPEG, markup in a comment


def pdf_file() -> bytes:
    """A valid one-page PDF whose text is markup."""
    text = MARKUP.format(kind="pdf")
    stream = f"BT /F1 10 Tf 10 100 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 600 200] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)


def png_file() -> bytes:
    """A valid 2x2 PNG with the markup in a tEXt chunk."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    pixels = zlib.compress(b"\x00\xff\x00\x00\xff\x00\x00" * 2)
    comment = b"Comment\x00" + MARKUP.format(kind="png").encode()
    ihdr = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"tEXt", comment)
        + chunk(b"IDAT", pixels)
        + chunk(b"IEND", b"")
    )


PDF, PNG = pdf_file(), png_file()
BINARIES: dict[str, tuple[dict[str, str], bytes, str]] = {  # path: headers, body, the reason it is refused
    "/files/report.pdf": ({"Content-Type": "application/pdf"}, PDF, "application/pdf"),
    "/files/report": ({"Content-Type": "application/pdf"}, PDF, "application/pdf"),
    "/blob/1": ({}, PDF, "PDF bytes"),
    "/img/photo.jpg": ({"Content-Type": "image/jpeg"}, JPEG, "image/jpeg"),
    "/img/photo": ({"Content-Type": "image/jpeg"}, JPEG, "image/jpeg"),
    "/raw/photo": ({}, JPEG, "JPEG bytes"),
    "/img/icon.png": ({"Content-Type": "image/png"}, PNG, "image/png"),
    "/raw/icon": ({}, PNG, "PNG bytes"),
    "/dl/file": (
        {"Content-Type": "application/octet-stream"},
        MARKUP.format(kind="octet").encode(),
        ("application/octet-stream"),
    ),
    "/mislabelled": ({"Content-Type": "text/html"}, PDF, "PDF bytes under Content-Type text/html"),
}


def download_portal() -> RawSite:
    """An index in UTF-16 linking every file, and one HTML page sent with no Content-Type (still text)."""
    links = "".join(f'<a href="{path}">{path}</a>' for path in [*BINARIES, "/untyped"])
    index = f'<html><body><div class="price">1.00</div>{links}</body></html>'.encode("utf-16")
    routes = {path: (200, headers, body) for path, (headers, body, _) in BINARIES.items()}
    routes["/"] = (200, {"Content-Type": "text/html; charset=utf-16"}, index)
    routes["/untyped"] = (200, {}, b'<html><body><div class="price">2.00</div></body></html>')
    return RawSite(routes)


class Naive(Spider):
    """Parses whatever arrives as HTML: binary responses must fail, not yield."""

    name = "naive"

    def parse(self, response: Response) -> Any:
        yield {"path": response.url.rsplit("/", 1)[-1], "price": response.css(".price::text").get()}
        yield from response.follow_all(css="a")


class Careful(Naive):
    """Checks ``is_text`` first: binary bodies are items of their own."""

    name = "careful"

    def parse(self, response: Response) -> Any:
        if not response.is_text:
            yield {"url": response.url, "size": len(response.body)}
            return
        yield from super().parse(response)


async def test_binary_responses_never_yield_items_or_links() -> None:
    site = download_portal()
    async with site.serve() as base:
        items, stats = await collect(Naive, start_urls=[base + "/"])
    assert sorted(item["price"] for item in items) == ["1.00", "2.00"]  # the UTF-16 index and the untyped page
    assert not [path for path in site.hits if path.startswith("/secret")]  # no link inside a binary was followed
    expected: dict[str, int] = {}
    for _, _, why in BINARIES.values():
        expected[f"callback error: not text ({why})"] = expected.get(f"callback error: not text ({why})", 0) + 1
    assert stats.failed_by_reason == expected
    assert_accounted(stats)


async def test_a_spider_that_asks_gets_the_bytes_of_binary_responses() -> None:
    site = download_portal()
    async with site.serve() as base:
        items, stats = await collect(Careful, start_urls=[base + "/"])
    sizes = {item["url"].removeprefix(base): item["size"] for item in items if "size" in item}
    assert sizes == {path: len(body) for path, (_, body, _) in BINARIES.items()}
    assert stats.requests_failed == 0
    assert_accounted(stats)


@pytest.mark.parametrize(
    "use",
    [
        lambda r: r.css("a"),
        lambda r: r.xpath("//a"),
        lambda r: r.xpath("id('x')"),
        lambda r: r.soup,
        lambda r: r.selector,
        lambda r: r.follow_all(css="a"),
        lambda r: r.follow_all(xpath="//a"),
    ],
)
def test_every_markup_parser_refuses_a_binary_body(use: Any) -> None:
    response = Response("http://files.test/doc", headers={"Content-Type": "application/pdf"}, body=PDF)
    with pytest.raises(NotTextResponse, match=r"^http://files.test/doc is not text \(application/pdf\)"):
        use(response)
    assert response.body == PDF and not response.is_text
    assert [r.url for r in response.follow_all(["/a", "b"])] == ["http://files.test/a", "http://files.test/b"]
