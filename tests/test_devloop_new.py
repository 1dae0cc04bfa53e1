"""eclaw new: every spider template crawls the library catalogue as it promises; the project
passes its own tests in a fresh virtual environment, offline."""

from __future__ import annotations

import functools
import json
import secrets
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import Settings
from eclaw.cli.main import main
from eclaw.devloop.templates import render_spider
from eclaw.spider import load_spider
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted
from tests.devsite import BOOKS, PASSWORD, USER, Catalogue
from tests.inprocess import eclaw_inprocess
from tests.wheelhouse import closure, repack

TITLES = sorted(title for title, _, _ in BOOKS.values())


@pytest.fixture
async def site() -> AsyncIterator[str]:
    async with serve(Catalogue().app()) as base:
        yield base


async def crawl_template(tmp_path: Path, template: str, url: str, **args: Any) -> tuple[list[Any], Any]:
    source = render_spider(f"lib_{template}", url, template)
    path = tmp_path / f"lib_{template}.py"
    path.write_text(source)
    items, stats = await collect(load_spider(str(path)), settings=Settings(store=""), **args)
    assert_accounted(stats)
    return items, stats


async def test_basic_template_visits_every_page_of_the_host(site: str, tmp_path: Path) -> None:
    items, stats = await crawl_template(tmp_path, "basic", f"{site}/")
    assert len(items) == stats.requests_parsed == 9  # home, 2 shelves, 5 books, the login page
    assert {i["title"] for i in items} >= {"Bibliothèque", "Shelf 2", *TITLES}
    assert stats.requests_failed == 0


async def test_rules_template_sends_item_pages_to_parse_item(site: str, tmp_path: Path) -> None:
    items, stats = await crawl_template(tmp_path, "rules", f"{site}/")
    assert sorted(i["title"] for i in items) == TITLES
    assert stats.requests_failed == 0 and f"{site}/login" not in {i["url"] for i in items}


async def test_sitemap_template_follows_the_index_to_the_pages(site: str, tmp_path: Path) -> None:
    items, stats = await crawl_template(tmp_path, "sitemap", f"{site}/")
    assert sorted(i["title"] for i in items) == TITLES
    assert stats.requests_parsed == 7  # the index, the sitemap, five books


async def test_login_template_logs_in_with_the_csrf_token_then_crawls_as_a_member(site: str, tmp_path: Path) -> None:
    items, stats = await crawl_template(tmp_path, "login", f"{site}/login", username=USER, password=PASSWORD)
    assert items[0]["title"] == "Mes emprunts"  # the member page, behind the session cookie
    assert sorted(i["title"] for i in items[1:]) == ["Der Zauberberg", "Kristin Lavransdatter"]
    again = tmp_path / "again"
    again.mkdir()
    items, stats = await crawl_template(again, "login", f"{site}/login", username=USER, password="wrong")
    assert items == [] and stats.finish_reason == "closespider: login failed: check -a username=... -a password=..."


async def test_api_template_reads_every_page_of_records(site: str, tmp_path: Path) -> None:
    items, stats = await crawl_template(tmp_path, "api", f"{site}/api/books")
    assert [i["id"] for i in items] == [1, 2, 3, 4, 5]
    assert stats.requests_parsed == 3


# -- the api template on the shapes real APIs have, the login template on a real-looking form ---------

RECORDS = [{"id": n, "title": title} for n, (title, _, _) in sorted(BOOKS.items())] + [
    {"id": n, "title": f"Volume {n}"} for n in (6, 7)
]
PAGE = 3  # records a page: pages of 3, 3 and 1


def page_of(request: web.Request) -> tuple[list[dict[str, Any]], int | None]:
    """The records of the page asked for (``?page=``, ``?_next=`` or ``?cursor=``: a first index) and
    the first index of the next page (``None`` on the last)."""
    start = int(request.query.get("page") or request.query.get("_next") or request.query.get("cursor") or 0)
    return RECORDS[start : start + PAGE], (start + PAGE if start + PAGE < len(RECORDS) else None)


def api_shapes() -> tuple[web.Application, dict[str, int]]:
    """Datasette, JSON:API-style ``links.next``, JSON-LD ``@links.next``, a ``Link`` header, a cursor
    token only; ``hits`` counts requests per path (a token taken for a URL would be one)."""
    hits: dict[str, int] = {}

    def shape(build: Callable[[web.Request, list[Any], int | None], web.Response]) -> Any:
        async def handler(request: web.Request) -> web.Response:
            return build(request, *page_of(request))

        return handler

    def as_json(data: Any, **headers: str) -> web.Response:
        return web.Response(text=json.dumps(data), content_type="application/json", headers=headers)

    def datasette(request: web.Request, rows: list[Any], more: int | None) -> web.Response:
        url = f"{request.url.with_query({'_next': str(more)})}" if more is not None else None
        return as_json({"ok": True, "rows": rows, "next": None if more is None else str(more), "next_url": url})

    def links(request: web.Request, rows: list[Any], more: int | None) -> web.Response:
        return as_json({"data": rows, "links": {"self": request.path_qs, "next": more and f"/links?page={more}"}})

    def at_links(request: web.Request, rows: list[Any], more: int | None) -> web.Response:
        nxt = {"href": f"./at-links?page={more}"} if more else None
        return as_json({"records": rows, "@links": {"next": nxt}, "next": "not-a-url"})

    def header(request: web.Request, rows: list[Any], more: int | None) -> web.Response:
        last = f'<{request.url.with_query(page=6)}>; rel="last"'
        if more is None:
            return as_json(rows, Link=last)
        return as_json(rows, Link=f'<{request.url.with_query(page=more)}>; rel="next", {last}')

    def cursor(request: web.Request, rows: list[Any], more: int | None) -> web.Response:
        return as_json({"results": rows, "next": more and f"c{more}"})

    @web.middleware
    async def count(request: web.Request, handler: Any) -> web.StreamResponse:
        hits[request.path] = hits.get(request.path, 0) + 1
        return await handler(request)  # type: ignore[no-any-return]

    app = web.Application(middlewares=[count])
    for path, build in [
        ("/db/books.json", datasette),
        ("/links", links),
        ("/at-links", at_links),
        ("/header", header),
        ("/cursor", cursor),
    ]:
        app.router.add_get(path, shape(build))
    return app, hits


async def new_and_crawl(tmp_path: Path, template: str, url: str, *args: str) -> tuple[str, str, list[Any], str]:
    """``eclaw new spider`` then ``eclaw crawl`` of it (in-process, in ``tmp_path``: the test's working
    directory): what new printed, the spider, the items, crawl's stderr."""
    code, said, err = await eclaw_inprocess("new", "spider", "mine", url, "--template", template)
    assert code == 0, err
    code, _, err = await eclaw_inprocess("crawl", "mine.py", "-o", "items.jsonl", *args)
    assert code == 0, err
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    return said, (tmp_path / "mine.py").read_text(), items, err


@pytest.mark.parametrize(
    ("path", "guessed"),
    [
        ("/db/books.json", ["records: under 'rows'", "next page: the URL under 'next_url'", "'next' holds '3'"]),
        ("/links", ["records: under 'data'", "next page: the URL under 'links.next'"]),
        ("/at-links", ["records: under 'records'", "the URL under '@links.next'", "'next' holds 'not-a-url'"]),
        ("/header", ["records: the page itself (a list), 3 on the first page", "the URL in the Link header"]),
    ],
    ids=["datasette", "links.next", "@links.next", "Link-header"],
)
async def test_api_template_finds_the_records_and_the_next_page_and_says_where(
    tmp_path: Path, path: str, guessed: list[str]
) -> None:
    app, hits = api_shapes()
    async with serve(app) as base:
        said, source, items, _ = await new_and_crawl(tmp_path, "api", base + path)
    assert sorted(item["id"] for item in items) == [r["id"] for r in RECORDS]  # every record of every page, once
    assert len(items) == len(RECORDS) and hits == {path: 1 + 3}  # the look `eclaw new` takes, the three pages
    comment = [line.strip(" #") for line in source.splitlines() if line.startswith("    #   ")]
    for finding in guessed:  # said by the command, and in the spider it wrote
        assert finding in said and any(finding in line for line in comment), (said, comment)


async def test_api_template_never_follows_a_cursor_token_as_a_url(tmp_path: Path) -> None:
    app, hits = api_shapes()
    async with serve(app) as base:
        said, source, items, err = await new_and_crawl(tmp_path, "api", f"{base}/cursor", "--log-level", "WARNING")
    assert [item["id"] for item in items] == [1, 2, 3] and hits == {"/cursor": 2}  # new's look, page 1; never /c3
    assert "next page: no URL on the first page" in said and "not followed: 'next' holds 'c3', not a URL" in said
    assert "next_at: Sequence[str] = NEXT" in source and 'records_at: Sequence[str] = ("results",)' in source
    assert "no next URL; not followed: 'next' holds 'c3', not a URL" in err


def test_api_template_without_the_api_tries_every_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", "spider", "offline", "http://127.0.0.1:9/api", "--template", "api"]) == 0
    said = capsys.readouterr().out
    assert "api: could not read http://127.0.0.1:9/api" in said and "tries every place of RECORDS and NEXT" in said
    source = (tmp_path / "offline.py").read_text()
    assert "records_at: Sequence[str] = RECORDS" in source and "next_at: Sequence[str] = NEXT" in source


def members_site() -> web.Application:
    """A sign-in page as real apps have them: a search form first, then a login form with no name or id,
    a CSRF token tied to a cookie, a realm ``<select>`` and a named submit button the server checks."""
    sessions: set[str] = set()

    async def sign_in_page(request: web.Request) -> web.Response:
        token = secrets.token_hex(8)
        page = web.Response(
            content_type="text/html",
            text=f"""<html><head><title>Sign in</title></head><body>
            <form action="/search"><input name="q"><button>Search</button></form>
            <form action="/session" method="post">
              <input type="hidden" name="authenticity_token" value="{token}">
              <input type="email" name="user[email]"> <input type="password" name="user[password]">
              <select name="realm"><option value="staff">Staff</option><option selected>members</option></select>
              <button type="submit" name="commit" value="sign-in">Sign in</button>
            </form></body></html>""",
        )
        page.set_cookie("csrf", token)
        return page

    async def sign_in(request: web.Request) -> web.Response:
        form = await request.post()
        given = (form.get("user[email]"), form.get("user[password]"), form.get("realm"), form.get("commit"))
        if form.get("authenticity_token") != request.cookies.get("csrf") or given != (
            USER,
            PASSWORD,
            "members",
            "sign-in",
        ):
            return web.Response(status=403, content_type="text/html", text="<title>Refused</title>")
        sid = secrets.token_hex(8)
        sessions.add(sid)
        answer = web.HTTPSeeOther("/loans")
        answer.set_cookie("sid", sid)
        raise answer

    async def loans(request: web.Request) -> web.Response:
        if request.cookies.get("sid") not in sessions:
            raise web.HTTPFound("/login")
        page = "<title>My loans</title><a href='/loans/dune'>Dune</a><a href='/logout'>Sign out</a>"
        return web.Response(content_type="text/html", text=page)

    async def loan(request: web.Request) -> web.Response:
        return web.Response(content_type="text/html", text="<title>Dune, due Monday</title>")

    app = web.Application()
    app.router.add_get("/login", sign_in_page)
    app.router.add_post("/session", sign_in)
    app.router.add_get("/loans", loans)
    app.router.add_get("/loans/dune", loan)
    return app


async def test_login_template_submits_the_form_as_a_browser_would(tmp_path: Path) -> None:
    async with serve(members_site()) as base:
        _, source, items, _ = await new_and_crawl(
            tmp_path, "login", f"{base}/login", "-a", f"username={USER}", "-a", f"password={PASSWORD}"
        )
    assert sorted(item["title"] for item in items) == ["Dune, due Monday", "My loans"]  # signed in, not signed out
    assert "Request.from_form(" in source and "urlencode" not in source


def test_new_spider_goes_in_spiders_and_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "spiders").mkdir()
    assert main(["new", "spider", "shelves", "https://library.test/", "--template", "rules"]) == 0
    source = (tmp_path / "spiders" / "shelves.py").read_text()
    assert "class ShelvesSpider(Spider):" in source and 'allowed_domains = ["library.test"]' in source
    capsys.readouterr()
    for args, message in [
        (["new", "spider", "shelves", "https://library.test/"], "spiders/shelves.py already exists: not overwritten"),
        (["new", "spider", "Shelves-2", "https://library.test/"], "spider name 'Shelves-2'"),
        (["new", "spider", "shelves2", "library.test"], "URL 'library.test': expected an http(s) URL"),
        (["new", "project", "spiders"], "spiders already exists"),
    ]:
        assert main(args) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_new_project_passes_its_tests_in_a_fresh_venv_offline(tmp_path: Path, eclaw_wheel: Path) -> None:
    """eclaw built as a wheel from this checkout, its dependencies, pytest and setuptools packed from
    this environment (no network: ``--no-index``), installed in a new venv that sees nothing else; the
    project is made by the installed eclaw (so the templates are in the wheel), installed editable as
    its README says (its build backend from the venv: no isolated build env to fill offline), tested.
    About 20 s alone, most of it pip."""
    house = tmp_path / "wheels"
    house.mkdir()
    run = functools.partial(subprocess.run, check=True, capture_output=True, text=True, timeout=300)
    shutil.copy2(eclaw_wheel, house)
    for dist in closure(["eclaw", "pytest-asyncio", "setuptools"]):
        if dist.metadata["Name"] != "eclaw":
            repack(dist, house)
    venv = tmp_path / "fresh"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check", "install", "-q"]
    pip += ["--no-compile", "--no-index", "--find-links", str(house)]
    run([*pip, "eclaw", "setuptools"])
    run([str(venv / "bin" / "eclaw"), "new", "project", "books"], cwd=tmp_path)
    project = tmp_path / "books"
    run([*pip, "--no-build-isolation", "-e", f"{project}[test]"], cwd=project)
    tests = "import sys, eclaw, pytest_asyncio, pytest; print(eclaw.__file__); sys.exit(pytest.main(sys.argv[1:]))"
    tested = subprocess.run(  # `python -m pytest`, saying first where eclaw came from (one interpreter, not two)
        [python, "-c", tests, "-p", "no:cacheprovider"], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.startswith(str(venv))  # the wheel, not this checkout
    assert "1 passed" in tested.stdout
