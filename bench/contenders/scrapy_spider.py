"""The benchmark crawl in Scrapy: same extraction and link following.

python bench/contenders/scrapy_spider.py BASE_URL OUT.jsonl CONCURRENCY
"""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

import scrapy
from scrapy.crawler import CrawlerProcess


class BenchSpider(scrapy.Spider):
    name = "bench"

    def __init__(self, base_url: str, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.start_url = f"{base_url}/p/0.html"
        self.allowed_domains = [urlsplit(base_url).hostname or ""]

    async def start(self):  # type: ignore[no-untyped-def, override]
        # Filtered like every other request (start_urls would be dont_filter=True
        # and fetch the home page twice).
        yield scrapy.Request(self.start_url)

    def parse(self, response):  # type: ignore[no-untyped-def]
        yield {
            "sku": response.css("span.sku::text").get(),
            "title": response.css("h1.title::text").get(),
            "price": float(response.css("span.price::text").get("nan")),
        }
        # Scrapy's Request raises on mailto:/javascript: links, so skip them here.
        for href in response.css("a::attr(href)").getall():
            if not href.startswith(("mailto:", "javascript:", "tel:")):
                yield response.follow(href)


def main() -> None:
    base_url, out, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    process = CrawlerProcess(
        settings={
            "CONCURRENT_REQUESTS": concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency,
            "DOWNLOAD_DELAY": 0,
            "AUTOTHROTTLE_ENABLED": False,
            "ROBOTSTXT_OBEY": False,
            "TELNETCONSOLE_ENABLED": False,
            "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
            "LOG_LEVEL": "WARNING",
            "FEEDS": {out: {"format": "jsonlines", "overwrite": True}},
        }
    )
    process.crawl(BenchSpider, base_url=base_url)
    process.start()


if __name__ == "__main__":
    main()
