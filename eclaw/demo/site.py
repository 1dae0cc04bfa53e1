"""The demo shop: a small deterministic web shop served by aiohttp.

500 products in 10 categories, listed 12 to a page. Pages carry the links a
real site has: duplicates (pagination, related products, fragments,
reordered query strings), off-site links, ``mailto:``/``javascript:``/``tel:``
links, and an ``/about`` page without products; ``/sitemap.xml`` lists them all
(:mod:`eclaw.demo.sitemap`). ``expected_products()`` returns exactly what a correct
crawl must extract.
"""

from __future__ import annotations

import html
import random
from dataclasses import dataclass
from functools import cache

from aiohttp import web

from eclaw.demo.account import add_account_routes
from eclaw.demo.sitemap import add_sitemaps

__all__ = ["CATEGORIES", "PER_PAGE", "Product", "expected_products", "make_app"]

CATEGORIES = ("books", "music", "garden", "kitchen", "toys", "sports", "tools", "office", "games", "outdoor")
PRODUCTS_PER_CATEGORY = 50
PER_PAGE = 12
OFFSITE = "http://offsite.invalid"
_ADJECTIVES = ("Amber", "Brisk", "Cosy", "Deft", "Eager", "Fable", "Gilded", "Hardy", "Ivory", "Jolly")
_NOUNS = ("Lantern", "Kettle", "Compass", "Notebook", "Trowel", "Racket", "Puzzle", "Stool", "Tent", "Whistle")


@dataclass(frozen=True, slots=True)
class Product:
    id: int
    sku: str
    title: str
    price: float
    category: str
    in_stock: bool
    rating: int
    description: str


@cache
def _catalogue() -> tuple[Product, ...]:
    rng = random.Random(20261129)
    products = []
    for index in range(len(CATEGORIES) * PRODUCTS_PER_CATEGORY):
        pid = index + 1
        category = CATEGORIES[index // PRODUCTS_PER_CATEGORY]
        title = f"{rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)} {pid}"
        products.append(
            Product(
                id=pid,
                sku=f"SKU-{pid:05d}",
                title=title,
                price=round(rng.uniform(2, 250), 2),
                category=category,
                in_stock=rng.random() > 0.2,
                rating=rng.randint(1, 5),
                description=f"The {title.lower()} is a fine {category} item & a customer favourite.",
            )
        )
    return tuple(products)


def expected_products() -> list[dict[str, object]]:
    """The items a correct crawl of the demo site yields, ordered by SKU."""
    return [
        {
            "sku": p.sku,
            "title": p.title,
            "price": p.price,
            "category": p.category,
            "in_stock": p.in_stock,
            "rating": p.rating,
        }
        for p in _catalogue()
    ]


def _page(title: str, body: str) -> web.Response:
    nav = "".join(f'<a class="category" href="/category/{c}">{c.title()}</a> ' for c in CATEGORIES)
    text = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} | Demo Shop</title></head>
<body><header><a href="/">Demo Shop</a> <a href="/about">About</a>
<a href="mailto:shop@offsite.invalid">Mail us</a> <a href="javascript:void(0)">Menu</a></header>
<nav>{nav}</nav>
<main>{body}</main>
<footer><a href="{OFFSITE}/partners">Partners</a> <a href="tel:+1555">Call</a>
<a href="/#top">Top</a></footer></body></html>"""
    return web.Response(text=text, content_type="text/html")


async def home(request: web.Request) -> web.Response:
    featured = _catalogue()[::97]
    links = "".join(f'<li><a class="product" href="/product/{p.id}">{html.escape(p.title)}</a></li>' for p in featured)
    return _page(
        "Home", f"<h1>Welcome</h1><ul class='featured'>{links}</ul><a href=\"{OFFSITE}/ads?id=1\">Sponsored</a>"
    )


async def about(request: web.Request) -> web.Response:
    return _page("About", "<h1>About us</h1><p>A shop that exists to be crawled.</p>")


async def category(request: web.Request) -> web.Response:
    slug = request.match_info["slug"]
    if slug not in CATEGORIES:
        raise web.HTTPNotFound()
    products = [p for p in _catalogue() if p.category == slug]
    pages = (len(products) + PER_PAGE - 1) // PER_PAGE
    try:
        page = int(request.query.get("page", "1"))
    except ValueError:
        raise web.HTTPBadRequest() from None
    if not 1 <= page <= pages:
        raise web.HTTPNotFound()
    shown = products[(page - 1) * PER_PAGE : page * PER_PAGE]
    items = "".join(
        f'<li><a class="product" href="/product/{p.id}">{html.escape(p.title)}</a>'
        f' <a href="/product/{p.id}#reviews">reviews</a> <span class="price">{p.price:.2f}</span></li>'
        for p in shown
    )
    pager = " ".join(f'<a class="page" href="/category/{slug}?page={n}">{n}</a>' for n in range(1, pages + 1))
    if page < pages:
        pager += f' <a class="next" href="/category/{slug}?sort=name&page={page + 1}">next</a>'
    if page > 1:
        pager += f' <a class="prev" href="/category/{slug}?page={page - 1}&sort=name">prev</a>'
    return _page(f"{slug.title()} page {page}", f"<h1>{slug.title()}</h1><ul>{items}</ul><p>{pager}</p>")


async def product(request: web.Request) -> web.Response:
    try:
        p = _catalogue()[int(request.match_info["pid"]) - 1]
    except (ValueError, IndexError):
        raise web.HTTPNotFound() from None
    n = len(_catalogue())
    related = "".join(f'<a class="related" href="/product/{(p.id + k * 37) % n + 1}">related</a> ' for k in (1, 2, 3))
    stock = "In stock" if p.in_stock else "Sold out"
    body = f"""<article class="product" data-id="{p.id}">
<h1 class="title">{html.escape(p.title)}</h1>
<p class="price">&pound;<span>{p.price:.2f}</span></p>
<p class="sku">{p.sku}</p><p class="stock">{stock}</p>
<p class="rating" data-stars="{p.rating}">{"★" * p.rating}</p>
<p class="category"><a href="/category/{p.category}">{p.category}</a></p>
<div class="description">{html.escape(p.description)}</div>
<p>{related}</p><a href="{OFFSITE}/maker/{p.id}">Manufacturer</a>
</article>"""
    return _page(p.title, body)


def make_app() -> web.Application:
    """The demo shop as an aiohttp application."""
    app = web.Application()
    app.router.add_get("/", home)
    app.router.add_get("/about", about)
    app.router.add_get("/category/{slug}", category)
    app.router.add_get("/product/{pid}", product)
    add_sitemaps(app, _catalogue(), CATEGORIES)
    add_account_routes(app, _page)  # /login and the members-only /account
    return app
