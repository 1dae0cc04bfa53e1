"""The test site for eclaw.text: the Python documentation from Debian's ``python3-doc`` package
under ``/docs/``, and a few pages of our own (a Latin-1 page, a page with no main content, a
page echoing a secret, a PDF, JSON); a spider for the CLI tests that crawls part of the docs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from eclaw import Request, Response, Spider

CANDIDATES = [Path("/usr/share/doc/python3-doc/html"), *sorted(Path("/usr/share/doc").glob("python3.*-doc/html"))]
SECTIONS = ("tutorial", "faq", "using", "howto")  # the CLI spider's part of the docs (about 50 pages)
TOKEN = "s3cr3t-t0ken-4242"

LATIN1 = (
    "<html lang='fr'><head><title>Café crème</title></head><body><nav><a href='/'>Accueil</a></nav>"
    "<article><h1>Café crème</h1><p>Une tasse de café crème coûte trois euros à Noël, déjà payée.</p>"
    "<p>Le garçon apporte aussi un croissant et une crêpe, très appréciés des clients du matin.</p>"
    "</article></body></html>"
)
EMPTY = (
    "<html><head><title>Nothing here</title></head><body><nav><ul><li><a href='/a'>Home</a></li>"
    "<li><a href='/b'>About</a></li></ul></nav><footer>© 2026 Example</footer></body></html>"
)
SECRET_PAGE = (
    "<html lang='en'><head><title>Account</title></head><body><main><h1>Your account</h1>"
    f"<p>Your API token is {TOKEN}; keep it to yourself, it opens every door of the account.</p>"
    "<p>Tokens rotate every ninety days, and the old one stops working a day after that.</p></main></body></html>"
)


def docs_folder() -> Path:
    """The HTML documentation folder; without it, skip (fail under CI: ``make test-servers`` installs it)."""
    for folder in CANDIDATES:
        if (folder / "tutorial" / "controlflow.html").exists():
            return folder
    message = "the Python documentation is missing: apt-get install python3-doc"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def make_app(docs: Path) -> web.Application:
    async def latin1(request: web.Request) -> web.Response:
        body = LATIN1.encode("iso-8859-1")
        return web.Response(body=body, headers={"Content-Type": "text/html; charset=iso-8859-1"})

    async def latin1_meta(request: web.Request) -> web.Response:
        page = LATIN1.replace("<head>", "<head><meta charset='iso-8859-1'>")
        return web.Response(body=page.encode("iso-8859-1"), content_type="text/html")

    async def fixed(request: web.Request) -> web.Response:
        pages = {"/empty.html": EMPTY, "/account.html": SECRET_PAGE}
        return web.Response(text=pages[request.path], content_type="text/html")

    async def pdf(request: web.Request) -> web.Response:
        return web.Response(body=b"%PDF-1.4\n" + bytes(range(256)) * 8, content_type="application/pdf")

    async def data(request: web.Request) -> web.Response:
        return web.json_response({"title": "not a page"})

    app = web.Application()
    app.router.add_get("/latin1.html", latin1)
    app.router.add_get("/latin1-meta.html", latin1_meta)
    app.router.add_get("/empty.html", fixed)
    app.router.add_get("/account.html", fixed)
    app.router.add_get("/file.pdf", pdf)
    app.router.add_get("/data.json", data)
    app.router.add_static("/docs/", docs)
    return app


class DocsSpider(Spider):
    """Crawls the tutorial, FAQ, "using" and HOWTO sections of the docs (``-a sections=a,b``: others)
    and our extra pages, yielding one small item per page (the markdown outputs write the pages)."""

    name = "pydocs"
    allowed_domains = ["127.0.0.1"]
    custom_settings = {"retries": 0, "concurrency": 4}

    def __init__(
        self, base_url: str = "http://127.0.0.1:1", access_token: str = "", sections: str = ",".join(SECTIONS),
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        self.base_url, self.access_token = base_url, access_token
        self.sections = tuple(sections.split(","))

    def start_requests(self) -> Iterator[Request]:
        for section in self.sections:
            yield Request(f"{self.base_url}/docs/{section}/index.html")
        for path in ("/latin1.html", "/empty.html", "/file.pdf", "/data.json"):
            yield Request(self.base_url + path)
        if self.access_token:
            yield Request(f"{self.base_url}/account.html?access_token={self.access_token}")

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url.partition("?")[0]}
        if not response.is_text or "html" not in response.headers.get("Content-Type", ""):
            return
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href).partition("#")[0]
            path = url.removeprefix(self.base_url)
            if any(path.startswith(f"/docs/{section}/") for section in self.sections) and path.endswith(".html"):
                yield Request(url)


async def get(url: str) -> Response:
    """``url`` fetched over HTTP from the local site, as eclaw's Response."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session, session.get(url) as answer:
        body = await answer.read()
        return Response(str(answer.url), status=answer.status, headers=answer.headers, body=body)
