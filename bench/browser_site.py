"""The rendered-pages benchmark site: a catalogue that exists only once its script ran.

    python -m bench.browser_site --pages 2000 --serve PORT     (bench/browser.py starts it)

``--pages N`` pages: ``ceil(N / 20)`` list pages ``/list/<k>`` and the rest product pages
``/p/<i>``. Every page's HTML is the same empty shell loading ``/static/app.js``; the script
reads the path, fetches the page's JSON (``/api/list/<k>``, ``/api/p/<i>``) and builds
what a reader sees: on a list page its title, 19 product links and the pagination (the
lists around it and "next"); on a product page its title, SKU, price, a description of
8-15 KB, three images, links to four related products and back to its list. A plain
fetch finds no item and no link. The title's web font and the images are counted when
asked for (``/stats``), so a run shows whether its crawler really blocked them; so are
the shells and the API calls (the latter: pages rendered so far, for memory samples).

Every page has one item, the same for any crawler that reads it (``expected_items``):
``sku``, ``title`` and ``price`` (None on list pages). ``--hide I`` leaves product I
out of its list (nothing links to it): a crawl that misses a page, for the tests.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from typing import Any

from aiohttp import web

from bench.site import WORDS, product

PER_LIST = 19  # product links on a list page: with the list itself, 20 pages a list
SHELL = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Bench Shop</title>
<style>@font-face{font-family:Bench;src:url(/font/bench.woff2) format("woff2")}h1{font-family:Bench,serif}</style>
</head><body><main id="app">Loading...</main><script src="/static/app.js"></script></body></html>"""
APP = r"""(async () => {
  const esc = s => String(s).replace(/[&<>"]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]));
  const app = document.getElementById('app');
  const list = location.pathname.match(/^\/list\/(\d+)$/);
  const item = location.pathname.match(/^\/p\/(\d+)$/);
  if (list) {
    const d = await (await fetch('/api/list/' + list[1])).json();
    const pages = d.around.map(k => `<a class="page" href="/list/${k}">${k + 1}</a>`).join(' ');
    const next = d.next === null ? '' : `<a class="next" rel="next" href="/list/${d.next}">next</a>`;
    app.innerHTML = `<h1 class="title">${esc(d.title)}</h1><span class="sku">${esc(d.sku)}</span>
      <ul>${d.products.map(p => `<li><a class="product" href="/p/${p.id}">${esc(p.title)}</a></li>`).join('')}</ul>
      <nav>${pages} ${next}</nav>`;
  } else if (item) {
    const d = await (await fetch('/api/p/' + item[1])).json();
    app.innerHTML = `<article><h1 class="title">${esc(d.title)}</h1>
      <p>Price: <span class="price">${d.price.toFixed(2)}</span> SKU: <span class="sku">${esc(d.sku)}</span></p>
      ${d.images.map(src => `<img src="${src}" width="320" height="240" alt="">`).join('')}
      ${d.description.map(p => `<p>${esc(p)}</p>`).join('')}
      <h2>Related</h2><ul>${d.related.map(r => `<li><a href="/p/${r}">product ${r}</a></li>`).join('')}</ul>
      <a href="/list/${d.list}#top">back to the list</a> <a href="http://offsite.invalid/p/${d.list}">elsewhere</a>
      </article>`;
  }
})();
"""
PNG = bytes.fromhex(  # a 1x1 transparent PNG
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def lists(pages: int) -> int:
    """How many of ``pages`` pages are list pages."""
    return -(-pages // (PER_LIST + 1))


def expected_items(pages: int) -> list[dict[str, Any]]:
    """The item of every page of a site of ``pages`` pages."""
    count = lists(pages)
    items: list[dict[str, Any]] = [_list_item(k, count) for k in range(count)]
    return items + [product(i) for i in range(pages - count)]


def _list_item(k: int, count: int) -> dict[str, Any]:
    return {"sku": f"LIST-{k:04d}", "title": f"Catalogue page {k + 1} of {count}", "price": None}


def app(pages: int, hide: int = -1) -> web.Application:
    """The site (see the module); ``hide`` is a product no list links to."""
    count = lists(pages)
    products = pages - count
    hits: Counter[str] = Counter()

    async def shell(request: web.Request) -> web.Response:
        hits["documents"] += 1
        return web.Response(text=SHELL, content_type="text/html")

    async def script(request: web.Request) -> web.Response:
        return web.Response(text=APP, content_type="application/javascript", headers={"Cache-Control": "max-age=3600"})

    async def list_api(request: web.Request) -> web.Response:
        k = _index(request, count)
        hits["api"] += 1
        shown = [i for i in range(k * PER_LIST, min((k + 1) * PER_LIST, products)) if i != hide]
        body = _list_item(k, count) | {
            "products": [{"id": i, "title": product(i)["title"]} for i in shown],
            "around": [n for n in range(k - 2, k + 3) if 0 <= n < count and n != k],
            "next": k + 1 if k + 1 < count else None,
        }
        return web.json_response(body)

    async def product_api(request: web.Request) -> web.Response:
        i = _index(request, products)
        hits["api"] += 1
        return web.json_response(_product_page(i, products, hide))

    async def counted(request: web.Request) -> web.Response:
        kind = request.match_info["kind"]
        hits["images" if kind == "img" else "fonts"] += 1
        return web.Response(body=PNG if kind == "img" else b"\0" * 2048, content_type="application/octet-stream")

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({key: hits[key] for key in ("documents", "api", "images", "fonts")})

    site = web.Application()
    site.router.add_get("/list/{n}", shell)
    site.router.add_get("/p/{n}", shell)
    site.router.add_get("/static/app.js", script)
    site.router.add_get("/api/list/{n}", list_api)
    site.router.add_get("/api/p/{n}", product_api)
    site.router.add_get("/{kind:img|font}/{name}", counted)
    site.router.add_get("/stats", stats)
    return site


def _index(request: web.Request, count: int) -> int:
    n = int(request.match_info["n"]) if request.match_info["n"].isdigit() else -1
    if not 0 <= n < count:
        raise web.HTTPNotFound()
    return n


def _product_page(i: int, products: int, hide: int) -> dict[str, Any]:
    rng = random.Random(i)
    description, size = [], 0
    target = rng.randint(8 * 1024, 15 * 1024)
    while size < target:
        paragraph = ". ".join(" ".join(rng.choice(WORDS) for _ in range(14)).capitalize() for _ in range(6)) + "."
        description.append(paragraph)
        size += len(paragraph)
    related = [r for r in (rng.randrange(products) for _ in range(4)) if r != hide]
    return product(i) | {
        "description": description,
        "images": [f"/img/{i}-{n}.png" for n in range(3)],
        "related": related,
        "list": i // PER_LIST,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--hide", type=int, default=-1, help="a product no list links to")
    parser.add_argument("--serve", type=int, required=True, help="the port")
    args = parser.parse_args()
    web.run_app(app(args.pages, args.hide), host="127.0.0.1", port=args.serve, print=None, access_log=None)


if __name__ == "__main__":
    main()
