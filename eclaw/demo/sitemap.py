"""The demo shop's sitemaps: ``/sitemap.xml``, an index of gzip'd sitemaps with ``lastmod`` dates.

One sitemap per category lists its products, each with the date it last changed
(:func:`product_lastmod`, deterministic); ``pages.xml.gz`` lists the home, about and category
pages. Each index entry's ``lastmod`` is the newest date in that sitemap, so a crawl with a
``sitemap_since`` skips whole categories that did not change.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from datetime import date, timedelta
from typing import Protocol

from aiohttp import web

__all__ = ["Listed", "add_sitemaps", "product_lastmod"]

_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
_START = date(2025, 1, 1)


class Listed(Protocol):
    """What a sitemap needs of a product of the shop (:class:`eclaw.demo.site.Product`)."""

    @property
    def id(self) -> int: ...

    @property
    def category(self) -> str: ...


def product_lastmod(product_id: int) -> date:
    """When the page of product ``product_id`` last changed: a day of 2025."""
    return _START + timedelta(days=(product_id * 37) % 365)


def _urlset(entries: list[tuple[str, date | None]]) -> bytes:
    urls = "".join(
        f"<url><loc>{loc}</loc>{f'<lastmod>{mod.isoformat()}</lastmod>' if mod else ''}</url>" for loc, mod in entries
    )
    return gzip.compress(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{_NS}">{urls}</urlset>'.encode())


def add_sitemaps(app: web.Application, products: Sequence[Listed], categories: Sequence[str]) -> None:
    """Serve ``/sitemap.xml`` and ``/sitemaps/{name}.xml.gz`` for ``products`` on ``app``."""

    def base(request: web.Request) -> str:
        return f"{request.scheme}://{request.host}"

    def newest(category: str) -> date:
        return max(product_lastmod(p.id) for p in products if p.category == category)

    async def index(request: web.Request) -> web.Response:
        sitemaps = [("pages", _START)] + [(c, newest(c)) for c in categories]
        entries = "".join(
            f"<sitemap><loc>{base(request)}/sitemaps/{name}.xml.gz</loc><lastmod>{mod.isoformat()}</lastmod></sitemap>"
            for name, mod in sitemaps
        )
        text = f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{_NS}">{entries}</sitemapindex>'
        return web.Response(text=text, content_type="application/xml")

    async def sitemap(request: web.Request) -> web.Response:
        name, root = request.match_info["name"], base(request)
        if name == "pages":
            pages = ["/", "/about", *(f"/category/{c}" for c in categories)]
            body = _urlset([(root + page, None) for page in pages])
        elif name in categories:
            body = _urlset([(f"{root}/product/{p.id}", product_lastmod(p.id)) for p in products if p.category == name])
        else:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type="application/gzip")

    app.router.add_get("/sitemap.xml", index)
    app.router.add_get("/sitemaps/{name}.xml.gz", sitemap)
