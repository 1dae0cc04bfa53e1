"""A huge page's links read as it is parsed, without building its tree (a SAX-like lxml target).

libxml2's tree of an HTML page costs about 700 bytes a link (an element, its attribute and
their text nodes): 280 MB for a page of 400,000 links. Reading the page a chunk at a time
with a parser target that keeps only the wanted attribute values costs the page's body and
the links found so far.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from lxml import etree

if TYPE_CHECKING:
    from eclaw.http.response import Response

__all__ = ["streamed_hrefs"]

_CHUNK = 64 * 1024


class _Hrefs:
    """An lxml parser target: the values of ``attrs`` on ``tags`` elements, as the page is read."""

    __slots__ = ("attrs", "found", "tags")

    def __init__(self, tags: Sequence[str], attrs: Sequence[str]) -> None:
        self.tags = frozenset(tags)
        self.attrs = frozenset(attrs)
        self.found: list[str] = []

    def start(self, tag: str, attrib: Any) -> None:
        if tag in self.tags:
            for name, value in attrib.items():
                if name in self.attrs and value:
                    self.found.append(value)

    def end(self, tag: str) -> None:
        return None

    def data(self, data: str) -> None:
        return None

    def close(self) -> None:
        return None


def streamed_hrefs(response: Response, tags: Sequence[str], attrs: Sequence[str]) -> Iterator[str]:
    """The values of ``attrs`` on the ``tags`` elements of an HTML ``response``, in page order, read a
    chunk at a time (the same libxml2 parser and recovery as its tree, so the same elements)."""
    if response.encoding.replace("-", "").lower() == "utf8":
        data = response.body.removeprefix(b"\xef\xbb\xbf")
    else:
        data = response.text.encode("utf-8")
    target = _Hrefs(tags, attrs)
    parser = etree.HTMLParser(target=target, encoding="utf-8", recover=True, huge_tree=True)
    try:
        for start in range(0, len(data), _CHUNK):
            parser.feed(data[start : start + _CHUNK])
            if target.found:
                found, target.found = target.found, []
                yield from found
        parser.close()
    except etree.XMLSyntaxError:  # nothing parseable (an empty body): the links read so far
        pass
    yield from target.found
