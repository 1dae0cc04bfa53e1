"""The state site of tests/state/site.py crawled only up to page ``LIMIT``: the same pages, links, 404s
and spider (its name, its items), a third of the pages. The output tests need a crawl long enough to
be killed in the middle and resumed, not the 600 pages the pause / resume tests walk (each costs CPU,
in three Pythons). Every page below ``LIMIT`` is still reached from page 0 (by ``n + 1``, or ``n + 2``
past a missing page)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eclaw import Response
from tests.state.site import StateSpider, make_app, missing

__all__ = ["LIMIT", "SPIDER", "StatePart", "expected", "make_app"]

LIMIT = 200
SPIDER = f"{Path(__file__)}:StatePart"  # for ``eclaw crawl``


def expected() -> tuple[set[int], set[int]]:
    """Pages that must be parsed, pages that must finally fail."""
    pages = set(range(LIMIT))
    failed = {n for n in pages if missing(n)}
    return pages - failed, failed


class StatePart(StateSpider):
    """:class:`StateSpider` following only the links to pages below ``LIMIT``."""

    def parse_page(self, response: Response, origin: str = "link") -> Any:
        n = int(response.css("h1::text").get())
        yield {"page": n, "title": response.css("title::text").get(), "origin": origin}
        hrefs = response.css("a::attr(href)").getall()  # /p/N#sK
        below = [href for href in hrefs if int(href.split("/p/")[1].split("#")[0]) < LIMIT]
        yield from response.follow_all(urls=below, callback=self.parse_page)
