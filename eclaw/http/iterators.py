"""Feed-style pages read a record at a time: XML nodes and CSV rows (``Response.xml_nodes``,
``Response.csv_rows``), Scrapy's ``XMLFeedSpider``/``CSVFeedSpider`` use cases.

XML is parsed incrementally by lxml (recover mode, entities unresolved, no DTD, no network):
each matching node is copied out as a selector of its own and the tree read so far is
dropped, so a large product feed never sits whole in memory as a tree.
"""

from __future__ import annotations

import copy
import csv
import io
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from lxml import etree

if TYPE_CHECKING:
    from parsel import Selector

__all__ = ["csv_rows", "xml_nodes"]

logger = logging.getLogger(__name__)


def xml_nodes(body: bytes, tag: str, url: str = "") -> Iterator[Selector]:
    """A selector for each ``tag`` element of the XML in ``body``, in document order. ``tag`` is a
    local name (any namespace) or ``{uri}name``; names inside each node match without namespaces."""
    from parsel import Selector

    if not tag or not isinstance(tag, str):
        raise ValueError(f"xml_nodes() needs an element name, got {tag!r}")
    events = etree.iterparse(
        io.BytesIO(body.lstrip()), events=("start", "end"), resolve_entities=False, no_network=True,
        load_dtd=False, remove_pis=True, huge_tree=False, recover=True,
    )  # fmt: skip
    inside = 0  # matching elements open around this point: only the outermost is dropped once read
    try:
        for event, element in events:
            name = element.tag
            if not isinstance(name, str) or (name if tag.startswith("{") else name.rpartition("}")[2]) != tag:
                continue
            if event == "start":
                inside += 1
                continue
            inside -= 1
            selector = Selector(root=copy.deepcopy(element), type="xml", base_url=url)
            selector.remove_namespaces()
            yield selector
            if not inside:
                _forget(element)
    except etree.XMLSyntaxError as exc:  # past what recover mode mends: the nodes read are kept
        logger.warning("XML of %s is malformed (%s): nodes after it not read", url, exc)


def _forget(element: Any) -> None:
    element.clear(keep_tail=True)
    parent = element.getparent()
    while parent is not None and element.getprevious() is not None:
        del parent[0]


def csv_rows(
    text: str,
    delimiter: str = ",",
    quotechar: str = '"',
    headers: Sequence[str] | None = None,
    url: str = "",
) -> Iterator[dict[str, str]]:
    """A dict for each row of the CSV ``text``, keyed by ``headers`` (default: the first row). Empty
    rows are skipped; a row with another number of fields is skipped with a warning."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quotechar=quotechar)
    names = list(headers) if headers is not None else None
    for number, row in enumerate(reader, 1):
        if not row:
            continue
        if names is None:
            names = [name.strip() for name in row]
            continue
        if len(row) != len(names):
            logger.warning("CSV %s row %d has %d fields, the header %d: skipped", url, number, len(row), len(names))
            continue
        yield dict(zip(names, row, strict=True))
