"""The demo shop's members' area: ``/login`` (a form with a CSRF token) and ``/account``, which only a
signed-in visitor sees (``DEMO_USER`` / ``DEMO_PASSWORD``); anyone else is sent to ``/login``."""

from __future__ import annotations

import html
import secrets
from collections.abc import Callable

from aiohttp import web

__all__ = ["DEMO_PASSWORD", "DEMO_USER", "ORDERS", "add_account_routes"]

DEMO_USER = "demo"
DEMO_PASSWORD = "demo-pass"
ORDERS = (7, 42, 99)  # the products in the demo member's order history


def add_account_routes(app: web.Application, page: Callable[[str, str], web.Response]) -> None:
    """Add ``/login`` and ``/account`` to the shop ``app``; ``page(title, body)`` is its layout."""
    sessions: set[str] = set()

    async def login_form(request: web.Request, error: str = "") -> web.Response:
        token = secrets.token_hex(16)
        message = f'<p class="error">{html.escape(error)}</p>' if error else ""
        response = page(
            "Sign in",
            f"""<h1>Sign in</h1>{message}<form id="login" method="post" action="/login">
<input type="hidden" name="csrf_token" value="{token}">
<label>User <input name="username"></label> <label>Password <input type="password" name="password"></label>
<button type="submit">Sign in</button></form>""",
        )
        response.set_cookie("csrftoken", token, httponly=True, samesite="Strict")
        return response

    async def login(request: web.Request) -> web.Response:
        form = await request.post()
        if not form.get("csrf_token") or form.get("csrf_token") != request.cookies.get("csrftoken"):
            return web.Response(status=403, text="CSRF check failed")
        if form.get("username") != DEMO_USER or form.get("password") != DEMO_PASSWORD:
            return await login_form(request, "Wrong user name or password.")
        session = secrets.token_hex(16)
        sessions.add(session)
        response = web.HTTPSeeOther("/account")
        response.set_cookie("shop_session", session, httponly=True)
        raise response

    async def account(request: web.Request) -> web.Response:
        if request.cookies.get("shop_session") not in sessions:
            raise web.HTTPFound("/login")
        orders = "".join(f'<li class="order"><a href="/product/{pid}">product {pid}</a></li>' for pid in ORDERS)
        return page("Your account", f'<h1>Your account</h1><p class="member">{DEMO_USER}</p><ul>{orders}</ul>')

    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_get("/account", account)
