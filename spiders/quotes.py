"""Quotes from https://quotes.toscrape.com/ (needs internet), following "Next".

    eclaw crawl spiders/quotes.py -o quotes.jsonl

The test suite runs it offline against two saved pages (tests/data/quotes/).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from eclaw import Request, Response, Spider


class QuotesSpider(Spider):
    name = "quotes"
    start_urls = ["https://quotes.toscrape.com/"]
    allowed_domains = ["quotes.toscrape.com"]

    async def parse(self, response: Response) -> AsyncIterator[dict[str, Any] | Request]:
        for quote in response.css("div.quote"):
            yield {
                "text": quote.css("span.text::text").get(),
                "author": quote.css("small.author::text").get(),
                "tags": quote.css("div.tags a.tag::text").getall(),
            }
        next_page = response.css("li.next a::attr(href)").get()
        if next_page:
            yield response.follow(next_page)
