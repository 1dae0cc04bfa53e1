"""eclaw new: every spider template crawls the library catalogue as it promises; the project
passes its own tests in a fresh virtual environment, offline."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from eclaw import Settings
from eclaw.cli.main import main
from eclaw.devloop.templates import render_spider
from eclaw.spider import load_spider
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted
from tests.devsite import BOOKS, PASSWORD, USER, Catalogue
from tests.wheelhouse import closure, repack

ROOT = Path(__file__).resolve().parent.parent

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


def test_new_project_passes_its_tests_in_a_fresh_venv_offline(tmp_path: Path) -> None:
    """eclaw built as a wheel from this checkout, its dependencies, pytest and setuptools packed from
    this environment (no network: ``--no-index``), installed in a new venv that sees nothing else; the
    project is made by the installed eclaw (so the templates are in the wheel), installed editable as
    its README says (its build backend from the venv: no isolated build env to fill offline), tested.
    About 20 s alone, most of it pip."""
    house = tmp_path / "wheels"
    house.mkdir()
    run = functools.partial(subprocess.run, check=True, capture_output=True, text=True, timeout=300)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(house), str(ROOT)])
    for dist in closure(["eclaw", "pytest-asyncio", "setuptools"]):
        if dist.metadata["Name"] != "eclaw":
            repack(dist, house)
    venv = tmp_path / "fresh"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile", "--no-index"]
    pip += ["--find-links", str(house)]
    run([*pip, "eclaw", "setuptools"])
    run([str(venv / "bin" / "eclaw"), "new", "project", "books"], cwd=tmp_path)
    project = tmp_path / "books"
    run([*pip, "--no-build-isolation", "-e", f"{project}[test]"], cwd=project)
    where = run([python, "-c", "import eclaw, pytest_asyncio; print(eclaw.__file__)"]).stdout
    assert where.startswith(str(venv))  # the wheel, not this checkout
    tested = subprocess.run(
        [python, "-m", "pytest", "-p", "no:cacheprovider"], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout
