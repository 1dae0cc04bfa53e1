"""The demo shop as a flow: categories -> product lists -> product details -> clean -> quality check.

    eclaw demo --serve --port 8080 &
    eclaw flow show spiders/shop_flow.py
    eclaw flow run spiders/shop_flow.py -a base_url=http://127.0.0.1:8080 --run-key 2026-11-30

(``make demo-flow`` does all three.) Each spider task's items land in
``eclaw-data/flows/shop/<run key>/<task>.jsonl``; the next task reads them
through ``ctx["task"]``. Run it again with the same key and every task that
succeeded is skipped.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eclaw import Response, Spider
from eclaw.flows import Context, Flow, TaskFailed

flow = Flow("shop", concurrency=2)


@flow.task(retries=2, retry_delay=1.0, spider_args=lambda ctx: {"start_urls": [ctx.params["base_url"] + "/"]})
class Categories(Spider):
    """The home page's category links."""

    name = "categories"

    def parse(self, response: Response) -> Iterator[dict[str, Any]]:
        for link in response.css("a::attr(href)").getall():
            if "/category/" in link:
                yield {"url": response.urljoin(link).split("#")[0], "name": link.rstrip("/").rsplit("/", 1)[-1]}


@flow.task(depends_on=["categories"], retries=2, start_urls=lambda ctx: ctx["categories"].values("url"))
class ProductLists(Spider):
    """Every page of every category: the product URLs."""

    name = "product_lists"

    def parse(self, response: Response) -> Iterator[Any]:
        for href in response.css("a.product::attr(href)").getall():
            yield {"url": response.urljoin(href).split("#")[0]}
        yield from response.follow_all(css="a.page, a.next, a.prev")


@flow.task(
    depends_on=["product_lists"],
    retries=2,
    timeout=600,
    start_urls=lambda ctx: sorted(set(ctx["product_lists"].values("url"))),
)
class ProductDetails(Spider):
    """Each product page: the product's fields."""

    name = "product_details"

    def parse(self, response: Response) -> Iterator[dict[str, Any]]:
        article = response.css("article.product")
        yield {
            "sku": article.css(".sku::text").get(),
            "title": article.css("h1.title::text").get(),
            "price": article.css(".price span::text").get(),
            "category": article.css(".category a::text").get(),
            "url": response.url,
        }


@flow.task(depends_on=["product_details"])
def clean(ctx: Context) -> dict[str, Any]:
    """One row per SKU, prices as numbers; writes products.jsonl next to the raw items."""
    rows: dict[str, dict[str, Any]] = {}
    for item in ctx["product_details"]:
        if item.get("sku"):
            price = item.get("price")
            rows[item["sku"]] = {**item, "price": float(price) if price else None}
    out = Path(ctx["product_details"].path).with_name("products.jsonl")
    with out.open("w", encoding="utf-8") as file:
        for row in sorted(rows.values(), key=lambda r: r["sku"]):
            file.write(json.dumps(row) + "\n")
    by_category = Counter(row["category"] for row in rows.values())
    return {"products": len(rows), "by_category": dict(sorted(by_category.items())), "path": str(out)}


@flow.task(depends_on=["clean", "categories"])
def quality_check(ctx: Context) -> dict[str, Any]:
    """Fail the run if the data looks wrong: a category without products, products without a price."""
    summary = ctx["clean"]
    empty = [c["name"] for c in ctx["categories"] if not summary["by_category"].get(c["name"])]
    with open(summary["path"], encoding="utf-8") as file:
        unpriced = sum(1 for line in file if json.loads(line)["price"] is None)
    if empty or unpriced or not summary["products"]:
        raise TaskFailed(f"{summary['products']} products, {unpriced} without a price, empty categories: {empty}")
    return {"products": summary["products"], "categories": len(summary["by_category"])}
