"""The benchmark crawl, as an eclaw user writes it (run with `eclaw crawl`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from eclaw import Request, Response, Spider


class BenchSpider(Spider):
    name = "bench"
    base_url = "http://127.0.0.1:8080"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{self.base_url}/p/0.html"]
        self.allowed_domains = [urlsplit(self.base_url).hostname or ""]

    def parse(self, response: Response) -> Iterator[dict[str, Any] | Request]:
        yield {
            "sku": response.css("span.sku::text").get(),
            "title": response.css("h1.title::text").get(),
            "price": float(response.css("span.price::text").get("nan")),
        }
        yield from response.follow_all(css="a")
