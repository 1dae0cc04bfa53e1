"""Guards of docs/forms.md: a form goes to its ``action`` resolved against the page's ``<base href>``
(the page itself when it has none), a GET form's fields replace the action's query string, and a
POST carries the hidden fields and the clicked button (whose ``formaction`` wins) through a real crawl."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from eclaw import Request, Response, Settings, Spider
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted

DESK = """<html><head><base href="/archive/"></head><body>
<form id="order" action="search" method="post">
  <input type="hidden" name="csrf" value="t0k3n"><input name="title" value="">
  <button name="go" value="now">Search</button><button name="go" value="later" formaction="later">Later</button>
</form>
<form id="find" action="find?old=1"><input name="q" value="tea"></form>
<form id="here" method="post"><input name="stay" value="yes"></form>
</body></html>"""


def archive(seen: list[tuple[str, str, str]]) -> web.Application:
    """The request desk at ``/desk/``; every other path records (method, path and query, body) and answers."""

    async def desk(request: web.Request) -> web.Response:
        if request.method == "POST":
            seen.append(("POST", request.path_qs, await request.text()))
            return web.Response(text="<p>kept</p>", content_type="text/html")
        return web.Response(text=DESK, content_type="text/html")

    async def anything(request: web.Request) -> web.Response:
        seen.append((request.method, request.path_qs, await request.text()))
        return web.Response(text="<p>ok</p>", content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/desk/", desk)
    app.router.add_route("*", "/{tail:.*}", anything)
    return app


class Clerk(Spider):
    name = "clerk"

    def parse(self, response: Response) -> Any:
        yield Request.from_form(response, {"title": "Kim"}, formid="order", callback=self.done)
        yield Request.from_form(response, formid="order", clickdata={"value": "later"}, callback=self.done)
        yield Request.from_form(response, formid="find", callback=self.done)
        yield Request.from_form(response, formid="here", callback=self.done)

    def done(self, response: Response) -> Any:
        yield {"url": response.url}


async def test_a_forms_action_is_resolved_against_base_href_and_a_get_replaces_the_query() -> None:
    seen: list[tuple[str, str, str]] = []
    async with serve(archive(seen)) as base:
        items, stats = await collect(Clerk, settings=Settings(store=""), start_urls=[base + "/desk/"])
    assert_accounted(stats)
    assert len(items) == 4 and stats.requests_failed == 0
    assert sorted(seen) == [
        ("GET", "/archive/find?q=tea", ""),  # against <base href>; the fields replace ?old=1
        ("POST", "/archive/later", "csrf=t0k3n&title=&go=later"),  # the button's formaction wins over the form's
        ("POST", "/archive/search", "csrf=t0k3n&title=Kim&go=now"),  # the first button clicked
        ("POST", "/desk/", "stay=yes"),  # no action: the page itself, not the base
    ]
