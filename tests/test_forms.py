"""Forms and JSON requests against a local site that reads them as a real server does: a login
with a CSRF token, a form of every kind of field, GET and multipart forms, several forms on a
page, a form on a windows-1251 page, and a JSON API paged by POST."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote_plus

import pytest
from aiohttp import BodyPartReader, web

from eclaw import Request, Response, Settings, Spider
from eclaw.fetchers.plain import PlainFetcher
from eclaw.http.forms import Upload
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted

PROFILE = """<html><head><title>Volunteer profile</title></head><body>
<form id="profile" action="/echo?from=profile" method="post">
  <input type="hidden" name="csrf" value="tok-42">
  <input name="name" value="Ada">
  <input name="nickname">
  <input name="badge" value="B-7" disabled>
  <fieldset disabled><input name="shift" value="night"></fieldset>
  <select name="station"><option value="north">North</option><option value="south" selected>South</option></select>
  <select name="slot"><option>Morning</option><option>Evening</option></select>
  <select name="days" multiple><option value="mon" selected>Mon</option><option value="tue">Tue</option>
    <option value="sat" selected>Sat</option></select>
  <input type="checkbox" name="skills" value="sound" checked>
  <input type="checkbox" name="skills" value="news">
  <input type="checkbox" name="skills" value="music" checked>
  <input type="checkbox" name="newsletter" checked>
  <input type="checkbox" name="sms">
  <input type="radio" name="tee" value="S"><input type="radio" name="tee" value="M" checked>
  <textarea name="bio">Likes jazz &amp; tea</textarea>
  <input type="reset" name="reset" value="Reset">
  <input type="button" name="preview" value="Preview">
  <input type="submit" name="action" value="save">
  <button name="action" value="delete" formaction="/echo?from=delete" formmethod="get">Delete</button>
  <button type="button" name="noop" value="x">Not a submit</button>
</form></body></html>"""

MANY = """<html><body>
<form name="search" action="/echo?page=1#results"><input name="q" value="jazz"></form>
<form id="subscribe" action="/echo" method="post"><div class="inner"><input name="email" value="a@b.c"></div>
  <input type="submit" name="plan" value="free"><input type="submit" name="plan" value="pro" disabled>
  <input type="submit" name="plan" value="team"></form>
<form action="/echo" method="post" enctype="multipart/form-data">
  <input name="title" value="Demo tape"><input type="file" name="tape"><input type="submit" value="Upload"></form>
<form action="/echo" method="post" enctype="text/plain"><input name="note" value="one line"></form>
</body></html>"""

KIOSK = (
    '<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1251"></head><body>'
    '<form action="/echo" method="post"><input name="city" value="Москва"></form>'
    '<form action="/echo" method="post" accept-charset="utf-8"><input name="city" value="Москва"></form>'
    "</body></html>"
).encode("cp1251")


LOGINS = web.AppKey("logins", list)


def forms_site() -> web.Application:
    """The radio station's volunteer portal; ``/echo`` answers what it was sent, as the server parsed it."""
    logins: list[dict[str, str]] = []
    app = web.Application()
    app[LOGINS] = logins

    async def echo(request: web.Request) -> web.Response:
        kind = request.content_type
        fields: list[Any] = []
        if kind == "multipart/form-data":
            async for part in await request.multipart():
                assert isinstance(part, BodyPartReader)
                data = await part.read()
                if part.filename is None:
                    fields.append([part.name, data.decode()])
                else:
                    fields.append([part.name, {"file": part.filename, "size": len(data)}])
        elif kind == "application/x-www-form-urlencoded":
            fields = [[name, value] for name, value in (await request.post()).items()]
        else:
            fields = [(await request.read()).decode("latin-1")]
        answer = {"method": request.method, "path": request.path, "query": list(request.query.items())}
        return web.json_response({**answer, "type": kind, "fields": fields})

    async def login_form(request: web.Request) -> web.Response:
        token = secrets.token_hex(8)
        response = web.Response(
            text=f"""<html><body><h1>Sign in</h1>
<form action="/echo?wrong-form" method="post"><input name="q"></form>
<form id="login" action="/login" method="post"><input type="hidden" name="csrf_token" value="{token}">
<input name="username"><input type="password" name="password"><button>Sign in</button></form></body></html>""",
            content_type="text/html",
        )
        response.set_cookie("csrf", token)
        return response

    async def login(request: web.Request) -> web.Response:
        form = await request.post()
        logins.append({k: str(v) for k, v in form.items()})
        if form.get("csrf_token") != request.cookies.get("csrf") or form.get("password") != "hunter2":
            return web.Response(status=403, text="bad login")
        response = web.HTTPFound("/rota")
        response.set_cookie("sid", f"sid-{form['username']}")
        raise response

    async def rota(request: web.Request) -> web.Response:
        if request.cookies.get("sid") != "sid-ada":
            raise web.HTTPFound("/login")
        rows = "".join(f"<li class='shift'>{day}</li>" for day in ("Mon 06:00", "Wed 22:00", "Sat 14:00"))
        return web.Response(
            text=f"<html><body><h1>Ada's rota</h1><ul>{rows}</ul></body></html>", content_type="text/html"
        )

    def static(body: str | bytes, content_type: str = "text/html") -> Any:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(body=body if isinstance(body, bytes) else body.encode(), content_type=content_type)

        return handler

    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_get("/rota", rota)
    app.router.add_get("/profile", static(PROFILE))
    app.router.add_get("/many", static(MANY))
    app.router.add_get("/kiosk", static(KIOSK))
    return app


@pytest.fixture
async def site() -> AsyncIterator[tuple[str, Any]]:
    """The site's base URL and a ``send(request) -> echo dict`` that fetches a request for real."""
    async with serve(forms_site()) as base:
        fetcher = PlainFetcher()
        await fetcher.open(Spider_(), Settings())

        async def page(path: str) -> Response:
            return await fetcher.fetch(Request(base + path))

        async def send(request: Request) -> dict[str, Any]:
            return (await fetcher.fetch(request)).json()  # type: ignore[no-any-return]

        send.page = page  # type: ignore[attr-defined]
        yield base, send
        await fetcher.close()


class Spider_(Spider):
    name = "forms"


async def test_every_kind_of_field_is_sent_as_a_browser_sends_it(site: tuple[str, Any]) -> None:
    _, send = site
    page = await send.page("/profile")
    echoed = await send(Request.from_form(page, {"nickname": "Countess", "skills": ["news"], "sms": None}))
    assert echoed["method"] == "POST" and echoed["path"] == "/echo" and echoed["query"] == [["from", "profile"]]
    assert echoed["fields"] == [
        ["csrf", "tok-42"],  # hidden: kept
        ["name", "Ada"],
        ["nickname", "Countess"],  # an input without a value, set by formdata in its place
        # disabled: neither the input nor the fieldset's
        ["station", "south"],  # the selected option
        ["slot", "Morning"],  # none selected: the first, by its text
        ["days", "mon"],
        ["days", "sat"],
        ["skills", "news"],  # formdata replaces all the checked boxes of the name
        ["newsletter", "on"],  # a checked box without a value
        ["tee", "M"],
        ["bio", "Likes jazz & tea"],
        ["action", "save"],  # the first submit button clicked; reset and plain buttons never sent
    ]


async def test_clickdata_picks_the_button_and_its_formaction_and_formmethod(site: tuple[str, Any]) -> None:
    base, send = site
    page = await send.page("/profile")
    deleting = Request.from_form(page, clickdata={"value": "delete"})
    assert deleting.method == "GET" and deleting.url.startswith(base + "/echo?")
    echoed = await send(deleting)
    assert ["from", "profile"] not in echoed["query"] and ["action", "delete"] in echoed["query"]
    assert ["csrf", "tok-42"] in echoed["query"]
    unclicked = await send(Request.from_form(page, dont_click=True))
    assert "action" not in [name for name, _ in unclicked["fields"]]
    with pytest.raises(ValueError, match="2 submit buttons match"):
        Request.from_form(page, clickdata={"name": "action"})
    assert Request.from_form(page, clickdata={"name": "action", "nr": 1}).method == "GET"


async def test_several_forms_on_a_page_get_and_multipart_and_text_plain(site: tuple[str, Any]) -> None:
    base, send = site
    page = await send.page("/many")
    search = Request.from_form(page, formname="search", formdata={"q": "free jazz"})
    assert search.method == "GET" and search.url == base + "/echo?q=free+jazz"  # the action's query and fragment go
    assert (await send(search))["query"] == [["q", "free jazz"]]
    inner = Request.from_form(page, formcss="div.inner input", clickdata={"value": "team"})
    assert (await send(inner))["fields"] == [["email", "a@b.c"], ["plan", "team"]]
    by_id = Request.from_form(page, formid="subscribe")
    assert (await send(by_id))["fields"][-1] == ["plan", "free"]  # the disabled "pro" is not clickable
    upload = Request.from_form(
        page, formxpath="//input[@name='title']", formdata={"tape": Upload("demo.ogg", b"OggS...", "audio/ogg")}
    )
    echoed = await send(upload)
    assert echoed["type"] == "multipart/form-data"
    assert echoed["fields"] == [["title", "Demo tape"], ["tape", {"file": "demo.ogg", "size": 7}]]
    empty = await send(Request.from_form(page, formnumber=2))  # no file chosen: an empty file part
    assert empty["fields"] == [["title", "Demo tape"], ["tape", {"file": "", "size": 0}]]
    plain = await send(Request.from_form(page, formnumber=3))
    assert plain["type"] == "text/plain" and plain["fields"] == ["note=one line\r\n"]
    with pytest.raises(ValueError, match="no form named 'nope'"):
        Request.from_form(page, formname="nope")
    with pytest.raises(ValueError, match="no form number 9"):
        Request.from_form(page, formnumber=9)


async def test_a_form_is_encoded_in_its_pages_charset_or_its_accept_charset(site: tuple[str, Any]) -> None:
    _, send = site
    page = await send.page("/kiosk")
    assert page.encoding == "cp1251"
    legacy = Request.from_form(page, {"city": "Санкт-Петербург ☃"})  # the snowman is not in windows-1251
    assert legacy.body == b"city=" + quote_plus("Санкт-Петербург &#9731;".encode("cp1251")).encode()
    modern = await send(Request.from_form(page, formnumber=1))
    assert modern["fields"] == [["city", "Москва"]]  # accept-charset="utf-8": the server reads it back


def test_a_page_without_the_form_is_a_clear_error() -> None:
    page = Response("https://radio.test/", body=b"<p>no forms</p>", headers={"Content-Type": "text/html"})
    with pytest.raises(ValueError, match=r"no <form> in https://radio.test/"):
        Request.from_form(page)


class RotaSpider(Spider):
    """Signs in through a form with a CSRF token (it picks the login form out of two), then reads the rota."""

    name = "rota"

    def parse(self, response: Response) -> Any:
        yield Request.from_form(
            response, {"username": "ada", "password": "hunter2"}, formid="login", callback=self.after_login
        )

    def after_login(self, response: Response) -> Any:
        for shift in response.css("li.shift::text").getall():
            yield {"shift": shift, "page": response.url}


async def test_login_with_a_csrf_token_through_a_crawl() -> None:
    app = forms_site()
    async with serve(app) as base:
        items, stats = await collect(RotaSpider, settings=Settings(store=""), start_urls=[base + "/login"])
    assert [item["shift"] for item in items] == ["Mon 06:00", "Wed 22:00", "Sat 14:00"]
    assert all(item["page"] == base + "/rota" for item in items)  # the POST's redirect, cookie and all
    [login] = app[LOGINS]
    assert login["username"] == "ada" and len(login["csrf_token"]) == 16
    assert_accounted(stats)


def cafe_api() -> web.Application:
    """A JSON API paged by POST: each page names the next."""
    menu = [f"dish {n}" for n in range(7)]
    app = web.Application()

    async def search(request: web.Request) -> web.Response:
        if request.content_type != "application/json" or "application/json" not in request.headers.get("Accept", ""):
            return web.json_response({"error": "send JSON"}, status=415)
        query = await request.json()
        start = query["page"] * 3
        page = [dish for dish in menu if query["q"] in dish][start : start + 3]
        return web.json_response({"results": page, "next": query["page"] + 1 if start + 3 < len(menu) else None})

    app.router.add_post("/api/search", search)
    return app


class MenuSpider(Spider):
    name = "menu"

    async def start_requests(self) -> AsyncIterator[Request]:
        yield Request.json(self.api, {"q": "dish", "page": 0})

    def parse(self, response: Response) -> Any:
        data = response.json()
        for dish in data["results"]:
            yield {"dish": dish}
        if data["next"] is not None:
            yield Request.json(self.api, {"q": "dish", "page": data["next"]})


async def test_a_json_api_paged_by_post() -> None:
    async with serve(cafe_api()) as base:
        items, stats = await collect(MenuSpider, settings=Settings(store=""), api=base + "/api/search")
    assert [item["dish"] for item in items] == [f"dish {n}" for n in range(7)]
    assert stats.requests_parsed == 3 and stats.requests_failed == 0
    again = Request.json("https://api.test/", {"page": 0, "q": "dish"})
    assert again.body == json.dumps({"q": "dish", "page": 0}, sort_keys=True, separators=(",", ":")).encode()
    assert Request.json("https://api.test/items").method == "GET"


async def test_from_form_passes_the_requests_own_options() -> None:
    page = Response("https://radio.test/p", body=PROFILE.encode(), headers={"Content-Type": "text/html"})
    request = Request.from_form(page, meta={"cookiejar": "ada"}, headers={"X-Trace": "1"}, priority=3, dont_filter=True)
    assert request.meta == {"cookiejar": "ada"} and request.priority == 3 and request.dont_filter
    assert request.headers == {"Content-Type": "application/x-www-form-urlencoded", "X-Trace": "1"}
