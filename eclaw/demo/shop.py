"""Crawl the bundled demo shop: categories, their pages, every product.

    eclaw demo --serve --port 8080 &
    eclaw crawl spiders/shop.py -a base_url=http://127.0.0.1:8080 -o products.jsonl

(``eclaw demo`` runs this same spider against a site it starts itself.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from eclaw import Request, Response, Spider


class ShopSpider(Spider):
    name = "shop"
    base_url = "http://127.0.0.1:8080"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = self.base_url.rstrip("/")
        self.allowed_domains = [urlsplit(self.base_url).hostname or ""]
        self.start_urls = [self.base_url + "/"]

    def parse(self, response: Response) -> Iterator[Request]:
        # The home page: follow every link; off-site, mailto: and javascript:
        # links are dropped by the frontier, never fetched.
        for link in response.css("a::attr(href)").getall():
            if "/product/" in link:
                yield response.follow(link, callback=self.parse_product)
            elif "/category/" in link:
                yield response.follow(link, callback=self.parse_category)
            else:
                yield response.follow(link)

    def parse_category(self, response: Response) -> Iterator[Request]:
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.page, a.next, a.prev", callback=self.parse_category)

    def parse_product(self, response: Response) -> Iterator[dict[str, Any] | Request]:
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
        yield from response.follow_all(css="a.related", callback=self.parse_product)
