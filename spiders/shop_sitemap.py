"""Crawl the demo shop from its sitemap: ``/sitemap.xml``, an index of gzip'd sitemaps, to every product.

    eclaw demo --serve --port 8080 &
    eclaw crawl spiders/shop_sitemap.py -a base_url=http://127.0.0.1:8080 -o products.jsonl
    eclaw crawl spiders/shop_sitemap.py -a base_url=http://127.0.0.1:8080 -a sitemap_since=2025-12-01

No category page is fetched: the sitemaps list every product, with the date it last
changed, so ``sitemap_since`` re-crawls only what changed (and skips whole sitemaps).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eclaw import Response, Spider


class ShopSitemapSpider(Spider):
    name = "shop_sitemap"
    base_url = "http://127.0.0.1:8080"
    sitemap_rules = [(r"/product/\d+$", "parse_product")]  # the home, about and category pages: not fetched

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sitemap_urls = [self.base_url.rstrip("/") + "/sitemap.xml"]

    def parse_product(self, response: Response) -> Iterator[dict[str, Any]]:
        article = response.css("article.product")
        yield {
            "sku": article.css(".sku::text").get(),
            "title": article.css("h1.title::text").get(),
            "price": float(article.css(".price span::text").get("nan")),
            "category": article.css(".category a::text").get(),
            "in_stock": article.css(".stock::text").get() == "In stock",
            "rating": int(article.css(".rating::attr(data-stars)").get("0")),
            "url": response.url,
        }
