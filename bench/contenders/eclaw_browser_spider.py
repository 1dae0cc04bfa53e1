"""The rendered-pages benchmark crawl (bench/browser.py), as an eclaw user writes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from eclaw import Request, Response, Spider


class RenderedBenchSpider(Spider):
    name = "bench-browser"
    base_url = "http://127.0.0.1:8080"
    fetcher = "browser"  # every page rendered in Chromium
    browser = {"actions": [{"wait_for": "h1.title"}]}  # the script puts it there with the rest

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{self.base_url}/list/0"]
        self.allowed_domains = [urlsplit(self.base_url).hostname or ""]

    def parse(self, response: Response) -> Iterator[dict[str, Any] | Request]:
        price = response.css("span.price::text").get()
        yield {
            "sku": response.css("span.sku::text").get(),
            "title": response.css("h1.title::text").get(),
            "price": float(price) if price is not None else None,
        }
        yield from response.follow_all(css="a")
