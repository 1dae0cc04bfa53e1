"""The no-framework lower bound: aiohttp + lxml + a set, written for speed.

    python bench/contenders/baseline.py BASE_URL OUT.jsonl CONCURRENCY

No retries, no politeness, no accounting, no canonicalisation beyond
dropping fragments: the least work a correct crawl of the bench site needs.
"""

from __future__ import annotations

import asyncio
import json
import sys
from urllib.parse import urljoin

import aiohttp
from lxml import etree

PARSER = etree.HTMLParser()
SKU = etree.XPath("string(//span[@class='sku'])")
TITLE = etree.XPath("string(//h1[@class='title'])")
PRICE = etree.XPath("string(//span[@class='price'])")
HREFS = etree.XPath("//a/@href")


async def crawl(base_url: str, out: str, concurrency: int) -> None:
    origin = base_url.rstrip("/")
    start = f"{origin}/p/0.html"
    seen = {start}
    queue: asyncio.Queue[str] = asyncio.Queue()
    queue.put_nowait(start)
    with open(out, "w", encoding="utf-8") as sink:  # noqa: ASYNC230 - plain buffered writes, as any script does
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

            async def worker() -> None:
                while True:
                    url = await queue.get()
                    try:
                        async with session.get(url) as response:
                            body = await response.read()
                        doc = etree.fromstring(body, PARSER)
                        item = {"sku": SKU(doc), "title": TITLE(doc), "price": float(PRICE(doc) or "nan")}
                        sink.write(json.dumps(item) + "\n")
                        for href in HREFS(doc):
                            href = href.partition("#")[0]
                            if href.startswith("/") and not href.startswith("//"):
                                link = origin + href
                            elif href.startswith(("http:", "https:", "mailto:", "//")):
                                if not href.startswith(origin + "/"):
                                    continue
                                link = href
                            else:
                                link = urljoin(url, href)
                            if link not in seen:
                                seen.add(link)
                                queue.put_nowait(link)
                    finally:
                        queue.task_done()

            workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
            await queue.join()
            for task in workers:
                task.cancel()


if __name__ == "__main__":
    asyncio.run(crawl(sys.argv[1], sys.argv[2], int(sys.argv[3])))
