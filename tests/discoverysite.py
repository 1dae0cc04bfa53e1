"""A news site for link rules and sitemaps: unlike the demo shop in every way that matters here.

"Le Quotidien" is served in windows-1252 (declared only in a ``<meta>``; titles use €, a
curly quote and an en dash, which Latin-1 lacks). Four sections list their articles three to a page; articles
carry tag links, related links (with ``#comments`` fragments), a print version, and links
to files that are not pages (PDF, JPEG, MP3, ZIP, an upper-case ``.PDF``). The home page has
a ``nav.sections`` region, footer links (legal, tags, archives, off-site, ``mailto:``), and
a link to its own sections under another host name (``localhost``), which is the same
server, and a link to a missing section (404). Every hit is counted by path and by host,
so a test can assert what was *not* fetched. Two articles are linked from tag pages only; sitemaps list them.

Sitemaps: ``/robots.txt`` names ``/sitemap_index.xml`` (namespaced), an index of two
gzip'd article sitemaps (2023, 2024: ``.xml.gz``, not Content-Encoding) and a sections
sitemap sent with ``Content-Encoding: gzip``. Under ``/bad/``: sitemaps that are not XML,
not sitemaps, truncated, a gzip bomb, corrupt gzip, XXE, an unescaped ``&``.
"""

from __future__ import annotations

import gzip
from collections import Counter
from dataclasses import dataclass
from functools import cache

from aiohttp import web

SECTIONS = ("monde", "sport", "culture", "economie")
PER_PAGE = 3
SM = "http://www.sitemaps.org/schemas/sitemap/0.9"
NAMESPACES = f'xmlns="{SM}" xmlns:xhtml="http://www.w3.org/1999/xhtml" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
BINARY = ("/docs/rapport-annuel.PDF", "/archives/2023.zip")
QUOTE, DASH = "\u2019", "\u2013"  # in windows-1252, not in Latin-1


@dataclass(frozen=True)
class Article:
    id: int
    section: str
    date: str  # YYYY-MM-DD
    hidden: bool = False  # linked from tag pages only

    @property
    def path(self) -> str:
        year, month, _ = self.date.split("-")
        return f"/article/{year}/{month}/article-{self.id}.html"

    @property
    def title(self) -> str:
        return f"Dépêche n°{self.id} {DASH} l{QUOTE}été à 3 € ({self.section})"

    @property
    def tags(self) -> tuple[str, str]:
        return ("politique" if self.id % 2 else "météo", f"dossier-{self.id % 3}")

    @property
    def files(self) -> tuple[str, ...]:
        return (f"/docs/article-{self.id}.pdf", f"/media/photo-{self.id}.jpg", f"/podcast/episode-{self.id}.mp3")


@cache
def articles() -> tuple[Article, ...]:
    found = []
    for n in range(1, 25):  # six articles a section, half in 2023, half in 2024
        year = 2023 if n % 2 else 2024
        found.append(Article(n, SECTIONS[n % 4], f"{year}-{(n % 12) + 1:02d}-{(n % 27) + 1:02d}"))
    found += [Article(25, "monde", "2024-03-03", hidden=True), Article(26, "sport", "2024-04-04", hidden=True)]
    return tuple(found)


def listed(section: str) -> list[Article]:
    return [a for a in articles() if a.section == section and not a.hidden]


def _page(title: str, body: str) -> web.Response:
    nav = "".join(f'<a href="/section/{s}/">{s.title()}</a> ' for s in SECTIONS)
    text = f"""<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252">
<title>{title} — Le Quotidien</title></head><body>
<header><a href="/">Le Quotidien</a> <a href="/abonnement">S{QUOTE}abonner</a></header>
<nav class="sections">{nav}</nav>
<main>{body}</main>
<footer><a href="/legal/mentions">Mentions légales</a> <a href="/tag/politique/">Politique</a>
<a href="{BINARY[0]}">Rapport (PDF)</a> <a href="{BINARY[1]}">Archives 2023</a>
<a href="http://pub.example.invalid/promo">Publicité</a> <a href="mailto:redaction@quotidien.invalid">Écrire</a>
<a href="javascript:window.print()">Imprimer</a></footer></body></html>"""
    return web.Response(body=text.encode("windows-1252"), content_type="text/html")


class NewsSite:
    """The site, counting every hit by path (with query) and by host."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.hosts: Counter[str] = Counter()

    def fetched(self, prefix: str = "/") -> set[str]:
        return {path for path in self.hits if path.startswith(prefix)}

    @web.middleware
    async def count(self, request: web.Request, handler: web.RequestHandler) -> web.StreamResponse:
        self.hits[request.path_qs] += 1
        self.hosts[request.host.partition(":")[0]] += 1
        return await handler(request)

    async def home(self, request: web.Request) -> web.Response:
        featured = "".join(f'<li><a href="{a.path}">{a.title}</a></li>' for a in articles()[:3])
        port = request.url.port
        other = f'<a href="http://localhost:{port}/section/monde/">Monde (miroir)</a>'
        gone = '<a href="/section/faits-divers/">Faits divers</a>'  # a 404
        return _page("Accueil", f"<h1>À la une</h1><ul class='une'>{featured}</ul>{other} {gone}")

    async def section(self, request: web.Request) -> web.Response:
        slug = request.match_info["slug"]
        if slug not in SECTIONS:
            raise web.HTTPNotFound()
        shown = listed(slug)
        page = int(request.query.get("page", "1"))
        pages = (len(shown) + PER_PAGE - 1) // PER_PAGE
        items = "".join(
            f'<li><a href="{a.path}">{a.title}</a> <a href="{a.path}#comments">réagir</a></li>'
            for a in shown[(page - 1) * PER_PAGE : page * PER_PAGE]
        )
        pager = " ".join(f'<a class="page" href="/section/{slug}/?page={n}">{n}</a>' for n in range(1, pages + 1))
        return _page(slug.title(), f"<h1>{slug.title()}</h1><ul class='articles'>{items}</ul><p>{pager}</p>")

    async def article(self, request: web.Request) -> web.Response:
        wanted = request.path
        if request.path.startswith("/en/"):
            wanted = request.path[3:]
        found = [a for a in articles() if a.path == wanted]
        if not found:
            raise web.HTTPNotFound()
        a = found[0]
        tags = " ".join(f'<a rel="tag" href="/tag/{t}/">{t}</a>' for t in a.tags)
        files = " ".join(f'<a href="{f}">{f.rsplit("/", 1)[1]}</a>' for f in a.files)
        related = articles()[25] if a.id == 24 else articles()[a.id % 20]  # 24 leads to hidden 26
        body = f"""<article><h1>{a.title}</h1><time datetime="{a.date}">{a.date}</time>
<p class="section"><a href="/section/{a.section}/">{a.section}</a></p><p class="tags">{tags}</p>
<p class="files">{files}</p><a href="{a.path}?print=1">Version imprimable</a>
<aside><a href="{related.path}#comments">À lire aussi</a></aside></article>"""
        return _page(a.title, body)

    async def tag(self, request: web.Request) -> web.Response:
        name = request.match_info["tag"]
        tagged = [a for a in articles() if name in a.tags or a.hidden]
        items = "".join(f'<li><a href="{a.path}">{a.title}</a></li>' for a in tagged)
        return _page(f"Tag {name}", f"<h1>{name}</h1><ul>{items}</ul>")

    async def plain(self, request: web.Request) -> web.Response:
        return _page(request.path, "<p>Une page sans articles.</p>")

    async def binary(self, request: web.Request) -> web.Response:
        return web.Response(body=b"%PDF-1.4 not a page", content_type="application/octet-stream")

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.count])
        app.router.add_get("/", self.home)
        app.router.add_get("/section/{slug}/", self.section)
        app.router.add_get("/article/{year}/{month}/{name}", self.article)
        app.router.add_get("/en/article/{year}/{month}/{name}", self.article)
        app.router.add_get("/tag/{tag}/", self.tag)
        for path in ("/legal/mentions", "/abonnement"):
            app.router.add_get(path, self.plain)
        for prefix in ("/docs/", "/media/", "/podcast/", "/archives/"):
            app.router.add_get(prefix + "{name}", self.binary)
        add_sitemaps(app)
        return app


def urlset(entries: list[str]) -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NAMESPACES}>{"".join(entries)}</urlset>'.encode()


def url_entry(base: str, a: Article) -> str:
    alternate = f'<xhtml:link rel="alternate" hreflang="en" href="{base}/en{a.path}"/>' if a.id % 5 == 0 else ""
    image = f"<image:image><image:loc>{base}/media/photo-{a.id}.jpg</image:loc></image:image>"
    return f"<url><loc>{base}{a.path}</loc><lastmod>{a.date}</lastmod>{alternate}{image}</url>"


@cache
def bomb() -> bytes:
    """~60 KB of gzip that inflates to 64 MiB of whitespace."""
    return gzip.compress(b"<urlset>" + b" " * (64 * 1024 * 1024), compresslevel=9)


def add_sitemaps(app: web.Application) -> None:
    """The news site's sitemaps, good and bad."""

    def base(request: web.Request) -> str:
        return f"http://{request.host}"

    def xml(body: bytes, **headers: str) -> web.Response:
        return web.Response(body=body, headers={"Content-Type": "application/xml", **headers})

    async def robots(request: web.Request) -> web.Response:
        return web.Response(text=f"User-agent: *\nDisallow: /admin/\n\nSitemap: {base(request)}/sitemap_index.xml\n")

    async def index(request: web.Request) -> web.Response:
        children = [
            ("sitemaps/articles-2023.xml.gz", "2023-12-31T23:00:00+00:00"),
            ("sitemaps/articles-2024.xml.gz", "2024-12-01"),
            ("sitemaps/sections.xml", "2024-07-01T08:00Z"),
        ]
        root = base(request)
        entries = "".join(
            f"<sitemap><loc>{root}/{loc}</loc><lastmod>{mod}</lastmod></sitemap>" for loc, mod in children
        )
        return xml(f'<?xml version="1.0"?>\n<sitemapindex xmlns="{SM}">{entries}</sitemapindex>'.encode())

    async def yearly(request: web.Request) -> web.Response:
        year = request.match_info["year"]
        entries = [url_entry(base(request), a) for a in articles() if a.date.startswith(year)]
        return web.Response(body=gzip.compress(urlset(entries)), content_type="application/x-gzip")

    async def sections(request: web.Request) -> web.Response:
        entries = [f"<url><loc>{base(request)}/section/{s}/</loc></url>" for s in SECTIONS]
        entries.append(f"<url><loc>{base(request)}/legal/mentions</loc><lastmod>2024-01-01</lastmod></url>")
        return xml(gzip.compress(urlset(entries)), **{"Content-Encoding": "gzip"})

    bad = {
        "not-xml.xml": b"this is not XML at all",
        "html.xml": b"<html><body><h1>Page introuvable</h1></body></html>",
        "bomb.xml.gz": bomb(),
        "corrupt.xml.gz": b"\x1f\x8b\x08\x00" + b"\xff" * 64,
    }

    async def bad_sitemap(request: web.Request) -> web.Response:
        name, root = request.match_info["name"], base(request)
        if name == "truncated.xml":  # the download ended in the middle of a URL
            whole = f"<url><loc>{root}{articles()[0].path}</loc></url>"
            cut = f"<url><loc>{root}{articles()[3].path}"[:-8]
            return xml(f'<?xml version="1.0"?>\n<urlset xmlns="{SM}">{whole}{cut}'.encode())
        if name == "xxe.xml":
            entities = f'<!ENTITY secret SYSTEM "{root}/secret"><!ENTITY file SYSTEM "file:///etc/hostname">'
            entries = "<url><loc>&secret;</loc></url><url><loc>&file;</loc></url>"
            real = f"<url><loc>{root}{articles()[1].path}</loc></url>"
            body = (
                f'<?xml version="1.0"?>\n<!DOCTYPE urlset [{entities}]>\n<urlset xmlns="{SM}">{entries}{real}</urlset>'
            )
            return xml(body.encode())
        if name == "ampersand.xml":
            return xml(urlset([f"<url><loc>{root}/section/monde/?page=2&amp;x=1</loc></url>",
                               f"<url><loc>{root}/section/sport/?page=2&x=1</loc></url>"]))  # fmt: skip
        if name not in bad:
            raise web.HTTPNotFound()
        kind = "application/gzip" if name.endswith(".gz") else "application/xml"
        return web.Response(body=bad[name], content_type=kind)

    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/sitemap_index.xml", index)
    app.router.add_get("/sitemaps/articles-{year}.xml.gz", yearly)
    app.router.add_get("/sitemaps/sections.xml", sections)
    app.router.add_get("/bad/{name}", bad_sitemap)

    async def secret(request: web.Request) -> web.Response:
        return web.Response(text="s3cret")

    app.router.add_get("/secret", secret)
