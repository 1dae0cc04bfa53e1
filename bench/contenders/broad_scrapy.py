"""The broad crawl in Scrapy, with the settings of Scrapy's "Broad Crawls" page.

    python bench/contenders/broad_scrapy.py SEEDS OUT.jsonl CONCURRENCY PER_DOMAIN DELAY RETRIES

The page's advice, as settings: concurrency raised, the Twisted thread pool at 20, log level INFO,
cookies off, the download timeout at 15 s, redirects off, breadth-first order (DEPTH_PRIORITY 1
and FIFO queues), ``DownloaderAwarePriorityQueue``, the asyncio reactor. Retries are kept (as
many as eclaw's) rather than turned off, because the site answers 429 once per page of some
hosts; the delay is not randomised, so both contenders wait exactly DELAY between two starts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import scrapy
from scrapy.crawler import CrawlerProcess


class BroadSpider(scrapy.Spider):
    name = "broad"

    def __init__(self, seeds: str, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.seeds = Path(seeds).read_text().split()

    async def start(self):  # type: ignore[no-untyped-def, override]
        for url in self.seeds:
            yield scrapy.Request(url)

    def parse(self, response):  # type: ignore[no-untyped-def]
        yield {"url": response.url, "title": response.css("h1::text").get()}
        for href in response.css("a::attr(href)").getall():
            if not href.startswith(("mailto:", "javascript:", "tel:")):  # Scrapy's Request refuses them
                yield response.follow(href)


def settings(out: str, concurrency: int, per_domain: int, delay: float, retries: int) -> dict[str, object]:
    return {
        "CONCURRENT_REQUESTS": concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": per_domain,
        "DOWNLOAD_DELAY": delay,
        "DOWNLOAD_DELAY_JITTER": 0,
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
        "REACTOR_THREADPOOL_MAXSIZE": 20,
        "LOG_LEVEL": "INFO",
        "COOKIES_ENABLED": False,
        "RETRY_ENABLED": retries > 0,
        "RETRY_TIMES": retries,
        "DOWNLOAD_TIMEOUT": 15,
        "REDIRECT_ENABLED": False,
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
        "AUTOTHROTTLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "FEEDS": {out: {"format": "jsonlines", "overwrite": True}},
    }


def main() -> None:
    seeds, out, concurrency, per_domain, delay, retries = sys.argv[1:7]
    process = CrawlerProcess(settings=settings(out, int(concurrency), int(per_domain), float(delay), int(retries)))
    process.crawl(BroadSpider, seeds=seeds)
    process.start()


if __name__ == "__main__":
    main()
