"""A gig listing whose HTML is an empty shell: everything a reader sees is built by JavaScript.

Unlike the demo shop, no page the server sends holds content or links. ``app.js`` is a
client-side router (``history.pushState``): ``/`` lists gigs fed by ``/api/gigs?page=N``
as the reader scrolls (infinite scroll); ``/gig/<id>`` shows one gig, and its tickets only
after a click on "Show tickets" (``/api/gigs/<id>/tickets``). Members (cookie
``member=gold``) see member prices. ``/slow`` waits for an API that answers late. ``/busy``
asks, once loaded, for an image, a font and the tracking script every 50 ms until it
goes (``p.asking`` once it has asked 5 times): a browser closing it is in the middle of one.
``/leaving`` sends, as it is left, the tracker a ``keepalive`` fetch and a beacon, then ``/sent``
one (not blocked: it tells a test the others went too).

The server counts what it is asked for (``hits``: images, fonts, media, the tracking script,
each API, the shell) and records some headers of every request (``seen``: ``Cookie``,
``Via``, ``User-Agent``, ``X-Tag``), so a test can tell what a browser fetched and how.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from aiohttp import web

SHELL = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Gigs</title>
<link rel="stylesheet" href="/static/style.css">
<style>li.gig { height: 400px; }</style>
<script src="/track.js"></script>
</head><body>
<nav><a href="/" class="home">Listing</a> <a href="/about" class="about">About</a></nav>
<main id="app">Loading…</main>
<script src="/static/app.js"></script>
</body></html>"""

APP_JS = r"""
const app = document.getElementById('app');
let token = 0, nextPage = 1, loading = false;

async function getJSON(url) { const r = await fetch(url); return r.json(); }

async function listing() {
  const mine = ++token;
  nextPage = 1;
  app.innerHTML = '<h1>Upcoming gigs</h1><ul id="gigs"></ul><p id="end" hidden>No more gigs</p>' +
    '<video src="/media/teaser.webm" autoplay muted></video>';
  await more(mine);
}

async function more(mine) {
  if (loading || nextPage === null || mine !== token) return;
  loading = true;
  const data = await getJSON('/api/gigs?page=' + nextPage);
  loading = false;
  if (mine !== token) return;
  const list = document.getElementById('gigs');
  for (const g of data.gigs) {
    const member = g.member_price ? `<span class="member">${g.member_price}</span>` : '';
    list.insertAdjacentHTML('beforeend', `<li class="gig" data-id="${g.id}"><img src="/img/${g.id}.png" alt="">` +
      `<a class="gig" href="/gig/${g.id}">${g.title}</a> <span class="venue">${g.venue}</span>${member}</li>`);
  }
  nextPage = data.next;
  if (nextPage === null) document.getElementById('end').hidden = false;
}

async function gig(id) {
  const mine = ++token;
  const g = await getJSON('/api/gigs/' + id);
  if (mine !== token) return;
  app.innerHTML = `<article><h1>${g.title}</h1><p class="venue">${g.venue}</p>` +
    '<button class="tickets">Show tickets</button><ul id="tickets"></ul>' +
    '<a class="back" href="/">All gigs</a></article>';
  document.querySelector('button.tickets').addEventListener('click', async () => {
    const tickets = await getJSON('/api/gigs/' + id + '/tickets');
    document.getElementById('tickets').innerHTML =
      tickets.map(t => `<li class="ticket" data-price="${t.price}">${t.kind}</li>`).join('');
  });
}

function route() {
  const m = location.pathname.match(/^\/gig\/(\d+)$/);
  if (m) gig(m[1]);
  else if (location.pathname === '/about') { ++token; app.innerHTML = '<h1>About us</h1>'; }
  else listing();
}

window.addEventListener('scroll', () => {
  if (window.innerHeight + window.scrollY >= document.body.scrollHeight - 50) more(token);
});
document.addEventListener('click', event => {
  const a = event.target.closest('a');
  if (!a || a.origin !== location.origin) return;
  event.preventDefault();
  history.pushState(null, '', a.href);
  route();
});
window.addEventListener('popstate', route);
route();
"""

STYLE = """@font-face { font-family: "Marquee"; src: url("/fonts/marquee.woff2") format("woff2"); }
body { font-family: "Marquee", sans-serif; }"""

SLOW = """<!doctype html><html><head><meta charset="utf-8"><title>Box office</title></head><body>
<p id="status">Waiting for the box office…</p>
<script>fetch('/api/slow').then(r => r.json()).then(d => {
  document.getElementById('status').textContent = d.status;
  document.body.insertAdjacentHTML('beforeend', '<p class="done">done</p>');
});</script></body></html>"""

BUSY = """<!doctype html><html><head><meta charset="utf-8"><title>Busy</title></head><body>
<script>let n = 0;
addEventListener('load', () => setInterval(() => {
  n += 1;
  if (n === 5) document.body.insertAdjacentHTML('afterbegin', '<p class="asking">asking</p>');
  new Image().src = '/img/busy-' + n + '.png';
  new FontFace('Busy' + n, 'url(/fonts/busy-' + n + '.woff2)').load().catch(() => {});
  const script = document.createElement('script');
  script.src = '/track.js?' + n;
  script.onerror = () => script.remove();
  document.head.append(script);
}, 50));</script></body></html>"""

LEAVING = """<!doctype html><html><head><meta charset="utf-8"><title>Leaving</title></head><body>
<p class="here">here</p>
<script>addEventListener('pagehide', () => {
  fetch('/track.js?keepalive', {method: 'POST', body: 'left', keepalive: true});
  navigator.sendBeacon('/track.js?beacon', 'left');
  navigator.sendBeacon('/sent', 'left');
});</script></body></html>"""

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)
VENUES = ("Paradiso", "Le Trianon", "Ancienne Belgique", "Vega")


def _kind(path: str) -> str:
    """What a path is, for the hit counts."""
    for prefix, kind in (("/img/", "image"), ("/fonts/", "font"), ("/media/", "media"), ("/api/", "api")):
        if path.startswith(prefix):
            return kind
    return _KINDS.get(path, "shell")


_KINDS = {"/track.js": "tracker", "/sent": "sent", "/static/app.js": "script", "/static/style.css": "style"}


class Seen(NamedTuple):
    """One request the site got."""

    path: str
    cookie: str
    via: str
    agent: str
    tag: str


@dataclass
class GigSite:
    """The site's state: ``pages`` pages of ``per_page`` gigs, ``slow`` seconds for ``/api/slow``."""

    pages: int = 3
    per_page: int = 2
    slow: float = 2.0
    hits: Counter[str] = field(default_factory=Counter)
    seen: list[Seen] = field(default_factory=list)

    @property
    def gigs(self) -> int:
        return self.pages * self.per_page

    def title(self, gig: int) -> str:
        return f"Gig {gig}: The {['Owls', 'Foxes', 'Hares', 'Wolves'][gig % 4]} live"

    @web.middleware
    async def count(self, request: web.Request, handler: web.RequestHandler) -> web.StreamResponse:
        self.hits[_kind(request.path)] += 1
        get = request.headers.get
        self.seen.append(Seen(request.path, get("Cookie", ""), get("Via", ""), get("User-Agent", ""), get("X-Tag", "")))
        return await handler(request)

    async def shell(self, request: web.Request) -> web.Response:
        if request.path == "/banned":
            return web.Response(status=429, text="<p>Too many requests</p>", content_type="text/html")
        return web.Response(text=SHELL, content_type="text/html")

    async def gigs_page(self, request: web.Request) -> web.Response:
        page = int(request.query.get("page", "1"))
        member = request.cookies.get("member") == "gold"
        first = (page - 1) * self.per_page + 1
        gigs = [{"id": n, "title": self.title(n), "venue": VENUES[n % 4]} for n in range(first, first + self.per_page)]
        for gig in gigs:
            if member:
                gig["member_price"] = f"€{10 + gig['id']}"
        await asyncio.sleep(0.02)  # an API takes a moment: the page fills in after its load event
        return web.json_response({"gigs": gigs, "next": page + 1 if page < self.pages else None})

    async def gig(self, request: web.Request) -> web.Response:
        gig = int(request.match_info["id"])
        if request.path.endswith("/tickets"):
            return web.json_response([{"kind": "standing", "price": 20 + gig}, {"kind": "balcony", "price": 35 + gig}])
        return web.json_response({"id": gig, "title": self.title(gig), "venue": VENUES[gig % 4]})

    async def slow_page(self, request: web.Request) -> web.Response:
        return web.Response(text=SLOW, content_type="text/html")

    async def busy_page(self, request: web.Request) -> web.Response:
        return web.Response(text=BUSY, content_type="text/html")

    async def leaving_page(self, request: web.Request) -> web.Response:
        return web.Response(text=LEAVING, content_type="text/html")

    async def sent(self, request: web.Request) -> web.Response:
        return web.Response(status=204)

    async def slow_api(self, request: web.Request) -> web.Response:
        await asyncio.sleep(self.slow)
        return web.json_response({"status": "Sold out"})

    async def asset(self, request: web.Request) -> web.Response:
        path = request.path
        if path == "/static/app.js":
            return web.Response(text=APP_JS, content_type="application/javascript")
        if path == "/static/style.css":
            return web.Response(text=STYLE, content_type="text/css")
        if path == "/track.js":
            return web.Response(text="window.tracked = true;", content_type="application/javascript")
        if path.startswith("/img/"):
            return web.Response(body=PNG, content_type="image/png")
        if path.startswith("/fonts/"):
            return web.Response(body=b"wOF2" + bytes(64), content_type="font/woff2")
        return web.Response(body=bytes(256), content_type="video/webm")

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.count])
        app.router.add_get("/api/gigs", self.gigs_page)
        app.router.add_get(r"/api/gigs/{id:\d+}", self.gig)
        app.router.add_get(r"/api/gigs/{id:\d+}/tickets", self.gig)
        app.router.add_get("/api/slow", self.slow_api)
        app.router.add_get("/slow", self.slow_page)
        app.router.add_get("/busy", self.busy_page)
        app.router.add_get("/leaving", self.leaving_page)
        app.router.add_post("/track.js", self.sent)
        app.router.add_post("/sent", self.sent)
        for path in ("/static/app.js", "/static/style.css", "/track.js", "/img/{n}", "/fonts/{n}", "/media/{n}"):
            app.router.add_get(path, self.asset)
        for path in ("/", "/about", "/banned", r"/gig/{id:\d+}"):
            app.router.add_get(path, self.shell)
        return app


def gig_ids(html: str) -> list[int]:
    """The gig ids listed in ``html`` (the ``data-id`` of each ``li.gig``)."""
    return [int(n) for n in re.findall(r'<li class="gig" data-id="(\d+)"', html)]
