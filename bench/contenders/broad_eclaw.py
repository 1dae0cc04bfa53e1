"""The broad crawl, as an eclaw user writes it (run with ``eclaw crawl -a seeds=FILE``): every seed,
every link, one item per page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eclaw import Request, Response, Spider


class BroadSpider(Spider):
    name = "broad"
    seeds = ""  # a file of start URLs, one a line

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = Path(self.seeds).read_text().split()

    def parse(self, response: Response) -> Iterator[dict[str, Any] | Request]:
        yield {"url": response.url, "title": response.css("h1::text").get()}
        yield from response.follow_all(css="a")
