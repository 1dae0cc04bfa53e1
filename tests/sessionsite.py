"""Local sites for cookies and sessions: a members' notebook behind a login form with a CSRF token
(two accounts, many notes), and a catalogue that bans the visitors it dislikes."""

from __future__ import annotations

import asyncio
import re
import secrets
from collections import Counter, defaultdict
from typing import Any

from aiohttp import web

ACCOUNTS = {"alice": "wonderland", "bob": "builder"}


class Notebook:
    """Each member's notes, ``per_page`` to a page; ``/note/N`` is 403 to anyone but its owner.

    ``logins`` counts sign-ins per member, ``anonymous`` requests for members' pages without a
    valid session, ``csrf_failures`` login posts whose token did not match the visitor's cookie.
    """

    def __init__(self, notes: int = 4, per_page: int = 5, delay: float = 0.0) -> None:
        self.notes = {user: [f"{user}'s note {n}" for n in range(notes)] for user in ACCOUNTS}
        self.per_page = per_page
        self.delay = delay
        self.sessions: dict[str, str] = {}
        self.logins: Counter[str] = Counter()
        self.anonymous = 0
        self.csrf_failures = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/login", self.login_form)
        app.router.add_post("/login", self.login)
        app.router.add_get("/notes", self.index)
        app.router.add_get("/note/{user}/{n}", self.note)
        return app

    async def login_form(self, request: web.Request) -> web.Response:
        token = request.cookies.get("csrf") or secrets.token_hex(8)
        response = _page(
            "Sign in",
            f"""<form method="post" action="/login"><input type="hidden" name="token" value="{token}">
<p><input name="user"></p><p><input type="password" name="password"></p>
<p><input type="checkbox" name="remember" value="1" checked> remember me</p><p><button>Sign in</button></p></form>""",
        )
        response.set_cookie("csrf", token)
        return response

    async def login(self, request: web.Request) -> web.Response:
        form = await request.post()
        user = str(form.get("user", ""))
        if form.get("token") != request.cookies.get("csrf"):
            self.csrf_failures += 1
            return web.Response(status=403, text="stale form")
        if ACCOUNTS.get(user) != form.get("password"):
            return _page("Sign in", "<p class='error'>wrong password</p>")
        self.logins[user] += 1
        sid = secrets.token_hex(8)
        self.sessions[sid] = user
        response = web.HTTPSeeOther("/notes")
        response.set_cookie("sid", sid, httponly=True)
        raise response

    def _member(self, request: web.Request) -> str:
        user = self.sessions.get(request.cookies.get("sid", ""))
        if user is None:
            self.anonymous += 1
            raise web.HTTPFound("/login")
        return user

    async def index(self, request: web.Request) -> web.Response:
        await asyncio.sleep(self.delay)
        user = self._member(request)
        page = int(request.query.get("page", "1"))
        notes = self.notes[user]
        shown = range((page - 1) * self.per_page, min(page * self.per_page, len(notes)))
        links = "".join(f'<li><a class="note" href="/note/{user}/{n}">note {n}</a></li>' for n in shown)
        more = f'<a class="next" href="/notes?page={page + 1}">older</a>' if page * self.per_page < len(notes) else ""
        return _page(f"{user}'s notebook", f"<p class='who'>{user}</p><ul>{links}</ul>{more}")

    async def note(self, request: web.Request) -> web.Response:
        await asyncio.sleep(self.delay)
        user = self._member(request)
        owner, n = request.match_info["user"], int(request.match_info["n"])
        if owner != user:
            return web.Response(status=403, text="not yours")
        return _page("note", f"<p class='who'>{user}</p><p class='text'>{self.notes[owner][n]}</p>")


class Catalogue:
    """``/shelf/N`` pages (each links to the next ones) for visitors it knows by a ``visitor`` cookie,
    given on a first visit. It bans visitor ``403_after`` after some requests (403, "banned"), and
    shows visitor ``captcha_after`` a "verify you are human" page instead of the shelf.

    ``seen`` records every request: (visitor, path, user agent); ``banned`` the visitors banned.
    """

    def __init__(self, shelves: int = 30, ban: int = 1, captcha: int = 2, after: int = 3) -> None:
        self.shelves = shelves
        self.ban, self.captcha, self.after = ban, captcha, after
        self.visitors = 0
        self.requests: Counter[int] = Counter()
        self.seen: list[tuple[int, str, str]] = []
        self.banned: dict[int, int] = {}  # visitor -> requests seen when it was banned
        self.user_agents: defaultdict[int, set[str]] = defaultdict(set)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/shelf/{n}", self.shelf)
        return app

    async def shelf(self, request: web.Request) -> web.Response:
        cookie = request.cookies.get("visitor")
        new = cookie is None
        if new:
            self.visitors += 1
            visitor = self.visitors
        else:
            visitor = int(re.sub(r"\D", "", cookie or "0"))
        self.requests[visitor] += 1
        self.seen.append((visitor, request.path, request.headers.get("User-Agent", "")))
        self.user_agents[visitor].add(request.headers.get("User-Agent", ""))
        response = self._answer(visitor, int(request.match_info["n"]))
        if new:
            response.set_cookie("visitor", f"v{visitor}")
        return response

    def _answer(self, visitor: int, n: int) -> web.Response:
        if self.requests[visitor] > self.after and visitor in (self.ban, self.captcha):
            self.banned.setdefault(visitor, len(self.seen))
            if visitor == self.ban:
                return web.Response(status=403, text="banned")
            return _page("Check", "<p>Please verify you are human</p>")
        links = "".join(f'<a href="/shelf/{m}">shelf {m}</a> ' for m in range(n + 1, min(n + 4, self.shelves)))
        return _page(f"Shelf {n}", f"<h1 class='shelf'>Shelf {n}</h1>{links}")


def _page(title: str, body: str) -> web.Response:
    return web.Response(
        text=f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{body}</body></html>",
        content_type="text/html",
    )


def echo_app() -> web.Application:
    """``/echo`` answers the request's cookies and headers as JSON; ``/set?k=v`` sets cookies; ``/go`` redirects."""
    app = web.Application()

    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"cookies": dict(request.cookies), "headers": dict(request.headers)})

    async def set_cookies(request: web.Request) -> web.Response:
        response = web.json_response({"set": dict(request.query)})
        for key, value in request.query.items():
            response.set_cookie(key, value)
        return response

    async def go(request: web.Request) -> Any:
        raise web.HTTPFound(request.query["to"])

    app.router.add_get("/echo", echo)
    app.router.add_get("/set", set_cookies)
    app.router.add_get("/go", go)
    return app
