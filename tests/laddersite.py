"""A town's three sites on three loopback hosts, each wanting a different fetcher.

Unlike the demo shop: windows-1252 pages, one host behind a bot wall, one whose pages are
empty until JavaScript runs, and one that a plain client reads fine.

- ``library`` (127.0.0.2): a catalogue of books behind a wall that answers any client
  without the ``sec-ch-ua`` header of a real Chrome with a 403 "Just a moment..." challenge
  page (the impersonate fetcher sends it, the plain one does not). ``wall_until`` lifts the
  wall after that many challenges (a wall that goes away, for the drift down).
- ``events`` (127.0.0.3): an agenda whose list and event pages are filled in by a script
  of the page's own: a plain or impersonating client gets an empty shell.
- ``news`` (127.0.0.4): plain HTML news items, but for the last story, which a script writes
  (one page in nine needs the browser: the page climbs, the host does not).

``hits`` counts what each host was asked for, by kind of client: ``plain``, or ``chrome``
(one that sends Chrome's ``sec-ch-ua``: curl impersonating Chrome, or Chromium itself); and
``events api``, the agenda's scripts, which only a browser loads.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from aiohttp import web

BOOKS = 12
EVENTS = 6
NEWS = 8
CHALLENGE = (
    "<!doctype html><html><head><title>Just a moment...</title></head><body>"
    "<div id='cf-chl-widget'>Checking your browser before accessing the library.</div></body></html>"
)
SHELL = """<!doctype html><html><head><meta charset="utf-8"><title>Agenda</title></head>
<body><main id="app"></main><script src="/api{path}.js"></script></body></html>"""  # the script fills #app


def client(request: web.Request) -> str:
    return "chrome" if "sec-ch-ua" in request.headers else "plain"


def page(body: str, status: int = 200) -> web.Response:
    return web.Response(body=body.encode("cp1252"), status=status, content_type="text/html", charset="windows-1252")


@dataclass
class Town:
    wall_until: int | None = None  # lift the library's wall after this many challenges (None: never)
    hits: Counter[str] = field(default_factory=Counter)
    challenges: int = 0

    def library(self) -> web.Application:
        async def wall(request: web.Request, handler: object) -> web.StreamResponse:
            kind = client(request)
            self.hits[f"library {kind}"] += 1
            lifted = self.wall_until is not None and self.challenges >= self.wall_until
            if kind == "plain" and not lifted:
                self.challenges += 1
                return page(CHALLENGE, status=403)
            return await handler(request)  # type: ignore[operator]

        async def catalogue(request: web.Request) -> web.Response:
            links = "".join(f"<li><a class='book' href='/book/{n}'>Livre n°{n}</a></li>" for n in range(BOOKS))
            return page(f"<html><body><h1>Catalogue</h1><ul>{links}</ul></body></html>")

        async def book(request: web.Request) -> web.Response:
            n = request.match_info["n"]
            return page(f"<html><body><h1 class='title'>Livre n°{n} — café crème</h1></body></html>")

        app = web.Application(middlewares=[web.middleware(wall)])
        app.router.add_get("/", catalogue)
        app.router.add_get("/book/{n}", book)
        return app

    def events(self) -> web.Application:
        async def shell(request: web.Request) -> web.Response:
            self.hits[f"events {client(request)}"] += 1
            return web.Response(text=SHELL.format(path=request.path), content_type="text/html")

        def script(html: str) -> web.Response:
            self.hits["events api"] += 1
            return web.Response(text=f"document.getElementById('app').innerHTML = {json.dumps(html)};",
                                content_type="application/javascript")  # fmt: skip

        async def api_list(request: web.Request) -> web.Response:
            return script(" ".join(f"<a class='event' href='/events/{n}'>Fête n°{n}</a>" for n in range(EVENTS)))

        async def api_event(request: web.Request) -> web.Response:
            n = int(request.match_info["n"])
            return script(f"<h1 class='title'>Fête n°{n}</h1><p class='when'>2026-12-{n + 1:02d}</p>")

        app = web.Application()
        app.router.add_get("/events", shell)
        app.router.add_get("/events/{n}", shell)
        app.router.add_get("/api/events.js", api_list)
        app.router.add_get("/api/events/{n}.js", api_event)
        return app

    def news(self) -> web.Application:
        async def listing(request: web.Request) -> web.Response:
            self.hits[f"news {client(request)}"] += 1
            links = "".join(f"<a class='story' href='/story/{n}'>Brève {n}</a>" for n in range(NEWS))
            return page(f"<html><body>{links}</body></html>")

        async def story(request: web.Request) -> web.Response:
            self.hits[f"news {client(request)}"] += 1
            n = request.match_info["n"]
            title = f"<h2 class='title'>Brève {n} : déjà vu</h2>"
            if n == str(NEWS - 1):  # written by a script: empty for any client that does not run it
                return page(f"<html><body><script>document.write({json.dumps(title)})</script></body></html>")
            return page(f"<html><body>{title}</body></html>")

        app = web.Application()
        app.router.add_get("/", listing)
        app.router.add_get("/story/{n}", story)
        return app
