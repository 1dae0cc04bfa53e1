"""A small library catalogue for the developer-loop tests, unlike the demo shop: pages in
ISO-8859-1 (declared in the header only), books as ``<dl>`` records, shelves paginated with a
``rel=next`` link, a sitemap index, a JSON API with ``next`` links, and a login form with a
CSRF field and a session cookie in front of the member pages."""

from __future__ import annotations

import json
import re
import secrets

from aiohttp import web

BOOKS = {
    1: ("Les Misérables", "Victor Hugo", "12.50"),
    2: ("Der Zauberberg", "Thomas Mann", "14.00"),
    3: ("Niels Lyhne", "J. P. Jacobsen", "9.75"),
    4: ("La Regenta", "Leopoldo Alas", "11.20"),
    5: ("Kristin Lavransdatter", "Sigrid Undset", "16.90"),
}
SHELVES = {1: [1, 2, 3], 2: [4, 5]}
USER, PASSWORD = "reader", "s3cret"


def latin1(html: str, status: int = 200) -> web.Response:
    """A page in ISO-8859-1, said in the header only; its title is its ``<h1>``."""
    title = re.search("<h1>(.*?)</h1>", html)
    page = f"<html><head><title>{title.group(1) if title else 'page'}</title></head><body>{html}</body></html>"
    return web.Response(
        body=page.encode("iso-8859-1"),
        status=status,
        headers={"Content-Type": "text/html; charset=iso-8859-1"},
    )


class Catalogue:
    """The site; ``hits`` counts requests per path, ``agents`` the User-Agents seen."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.agents: list[str] = []
        self._sessions: set[str] = set()
        self._csrf = secrets.token_hex(8)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._count])
        routes = [
            ("/", self.home),
            ("/shelf/{n}", self.shelf),
            ("/book/{n}", self.book),
            ("/sitemap.xml", self.sitemap_index),
            ("/sitemap-books.xml", self.sitemap),
            ("/api/books", self.api),
            ("/login", self.login_form),
            ("/account", self.account),
            ("/binary.pdf", self.pdf),
        ]
        for path, handler in routes:
            app.router.add_get(path, handler)
        app.router.add_post("/login", self.login)
        return app

    @web.middleware
    async def _count(self, request: web.Request, handler: object) -> web.StreamResponse:
        self.hits[request.path] = self.hits.get(request.path, 0) + 1
        self.agents.append(request.headers.get("User-Agent", ""))
        return await handler(request)  # type: ignore[operator, no-any-return]

    async def home(self, request: web.Request) -> web.Response:
        links = "".join(f'<li><a class="shelf" href="/shelf/{n}">Shelf {n}</a></li>' for n in SHELVES)
        return latin1(f"<h1>Bibliothèque</h1><ul>{links}</ul><a href='/login'>Se connecter</a>")

    async def shelf(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n not in SHELVES:
            return latin1("<h1>Introuvable</h1>", 404)
        books = "".join(f'<li><a class="book" href="/book/{b}">{BOOKS[b][0]}</a></li>' for b in SHELVES[n])
        more = f'<a rel="next" href="/shelf/{n + 1}">suite</a>' if n + 1 in SHELVES else ""
        return latin1(f"<h1>Shelf {n}</h1><ol>{books}</ol>{more}")

    async def book(self, request: web.Request) -> web.Response:
        raw = request.match_info["n"]
        if not raw.isdigit() or int(raw) not in BOOKS:
            return latin1("<h1>Ce livre est sorti</h1><p>Plus de fiche.</p>")  # 200, but no record
        title, author, price = BOOKS[int(raw)]
        return latin1(
            f'<h1>{title}</h1><dl class="record"><dt>Author</dt><dd class="author">{author}</dd>'
            f'<dt>Price</dt><dd class="price">{price} EUR</dd></dl>'
        )

    async def sitemap_index(self, request: web.Request) -> web.Response:
        base = f"{request.scheme}://{request.host}"
        xml = (
            '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<sitemap><loc>{base}/sitemap-books.xml</loc></sitemap></sitemapindex>"
        )
        return web.Response(text=xml, content_type="application/xml")

    async def sitemap(self, request: web.Request) -> web.Response:
        base = f"{request.scheme}://{request.host}"
        urls = "".join(f"<url><loc>{base}/book/{n}</loc></url>" for n in BOOKS)
        xml = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        return web.Response(text=xml, content_type="application/xml")

    async def api(self, request: web.Request) -> web.Response:
        page = int(request.query.get("page", "1"))
        ids = sorted(BOOKS)[(page - 1) * 2 : page * 2]
        results = [{"id": n, "title": BOOKS[n][0], "author": BOOKS[n][1]} for n in ids]
        more = page * 2 < len(BOOKS)
        base = f"{request.scheme}://{request.host}"
        data = {"results": results, "next": f"{base}/api/books?page={page + 1}" if more else None}
        return web.Response(text=json.dumps(data), content_type="application/json")

    async def login_form(self, request: web.Request) -> web.Response:
        return latin1(
            '<h1>Connexion</h1><form method="post" action="/login">'
            f'<input type="hidden" name="csrf" value="{self._csrf}">'
            '<input name="username"><input type="password" name="password"><button>OK</button></form>'
        )

    async def login(self, request: web.Request) -> web.Response:
        form = await request.post()
        if form.get("csrf") != self._csrf or (form.get("username"), form.get("password")) != (USER, PASSWORD):
            return latin1("<h1>Connexion refusée</h1>", 403)
        token = secrets.token_hex(8)
        self._sessions.add(token)
        response = web.HTTPFound("/account")
        response.set_cookie("session", token)
        raise response

    async def account(self, request: web.Request) -> web.Response:
        if request.cookies.get("session") not in self._sessions:
            raise web.HTTPFound("/login")
        books = "".join(f'<li><a class="book" href="/book/{b}">{BOOKS[b][0]}</a></li>' for b in (2, 5))
        return latin1(f"<h1>Mes emprunts</h1><p class='logout'>Déconnexion</p><ol>{books}</ol>")

    async def pdf(self, request: web.Request) -> web.Response:
        return web.Response(body=b"%PDF-1.4 binary\x00\x01", content_type="application/pdf")
