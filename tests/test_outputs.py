"""Outputs are independent: every output receives every item, whatever its shape, and one failing
output keeps no item from the others; a run that dead-lettered items says so in its exit status."""

from __future__ import annotations

import asyncio
import csv
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiohttp import web

from eclaw.spider import Spider
from eclaw.storage.files import CsvExporter
from eclaw.testing import serve
from tests.conftest import read_jsonl, record_file

AUTHORS = ["Émile Zola", "Jürgen Becker", "Søren Kierkegaard", "Ana Pérez", "Zoë Brandt", "Håkon Li", "Chloé Roy"]
BOOKS_PER_PAGE = 10
PAGES = 15  # 150 books + 7 authors = 157 items of two shapes

LIBRARY = '''
from eclaw import Spider


class Library(Spider):
    """The index lists authors (name, country), then paginated book pages (isbn, title, price, author)."""

    name = "library"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [self.base_url + "/"]

    def parse(self, response):
        for row in response.css("tr.author"):
            yield {"name": row.css("td.name::text").get(), "country": row.css("td.country::text").get()}
        yield from response.follow_all(css="a.shelf", callback=self.parse_shelf)

    def parse_shelf(self, response):
        for book in response.css("li.book"):
            yield {
                "isbn": book.attrib["data-isbn"],
                "title": book.css("cite::text").get(),
                "price": float(book.css("b::text").get()),
                "author": book.css("i::text").get(),
            }
'''


def library_app() -> web.Application:
    """A small library catalogue in windows-1252, authors in a table and books on shelf pages."""

    def page(body: str) -> web.Response:
        html = f'<html><head><meta charset="windows-1252"></head><body>{body}</body></html>'
        return web.Response(body=html.encode("cp1252"), content_type="text/html", charset="windows-1252")

    async def index(request: web.Request) -> web.Response:
        rows = "".join(f'<tr class="author"><td class="name">{a}</td><td class="country">EU</td></tr>' for a in AUTHORS)
        shelves = "".join(f'<a class="shelf" href="/shelf/{n}">shelf {n}</a>' for n in range(PAGES))
        return page(f"<table>{rows}</table><nav>{shelves}</nav>")

    async def shelf(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        books = "".join(
            f'<li class="book" data-isbn="978-{n:02d}{i:02d}"><cite>Tome {n}.{i} — «été»</cite>'
            f"<b>{n + i / 100:.2f}</b><i>{AUTHORS[(n + i) % len(AUTHORS)]}</i></li>"
            for i in range(BOOKS_PER_PAGE)
        )
        return page(f"<ul>{books}</ul>")

    app = web.Application()
    app.router.add_get("/", index)
    app.router.add_get("/shelf/{n}", shelf)
    return app


async def eclaw(cwd: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eclaw", *args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


async def test_items_of_two_shapes_reach_every_output_in_either_order(tmp_path: Path) -> None:
    spider = tmp_path / "library.py"
    spider.write_text(LIBRARY)
    async with serve(library_app()) as base:
        for first, second in (("x.csv", "y.jsonl"), ("y.jsonl", "x.csv")):
            args = ["crawl", str(spider), "-a", f"base_url={base}", "-o", first, "-o", second, "-q", "-s", "store="]
            code, stdout, stderr = await eclaw(tmp_path, *args)
            assert code == 0, stderr
            jsonl, rows = read_jsonl(tmp_path / "y.jsonl"), csv_rows(tmp_path / "x.csv")
            assert len(jsonl) == len(rows) == 157
            assert list(rows[0]) == ["name", "country", "isbn", "title", "price", "author"]  # the union of the fields
            authors = [row for row in rows if row["name"]]
            assert sorted(row["name"] for row in authors) == sorted(AUTHORS)  # no mojibake from windows-1252
            assert all(row["isbn"] == "" for row in authors) and all(row["name"] == "" for row in rows[7:])
            assert {row["isbn"] for row in rows[7:]} == {item["isbn"] for item in jsonl if "isbn" in item}
            assert "Tome 0.0 — «été»" in {row["title"] for row in rows}
            for output in (first, second):
                assert re.search(rf"written to {re.escape(output)}\s+157\n", stdout), stdout
            assert "dead-lettered" not in stdout


async def test_a_failing_output_keeps_no_item_from_the_others_and_the_exit_status_says_so(tmp_path: Path) -> None:
    spider = tmp_path / "library.py"
    spider.write_text(LIBRARY)
    (tmp_path / "full.jsonl").symlink_to("/dev/full")  # every write fails with ENOSPC, as on a full disk
    async with serve(library_app()) as base:
        code, stdout, stderr = await eclaw(
            tmp_path, "crawl", str(spider), "-a", f"base_url={base}", "-o", "full.jsonl", "-o", "ok.csv", "-q",
            "-s", "store=", "--log-level", "ERROR",
        )  # fmt: skip
    assert code == 3, (stdout, stderr)
    assert stderr.strip().splitlines()[-1] == "eclaw: 157 items dead-lettered, 0 lost: not every item was stored"
    assert len(csv_rows(tmp_path / "ok.csv")) == 157  # the healthy output has every item
    dead = read_jsonl(tmp_path / record_file("library", "dead-letter"))
    assert len(dead) == 157 and {(d["stage"], d["name"], d["spider"]) for d in dead} == {
        ("output", "full.jsonl", "library")
    }
    assert len({d["run"] for d in dead}) == 1 and "No space left on device" in dead[0]["error"]
    summary = " ".join(stdout.split())
    assert "written to ok.csv 157" in summary and "items dead-lettered 157 by full.jsonl 157" in summary


async def open_csv(path: Path, resume: dict[str, Any] | None = None) -> CsvExporter:
    class Books(Spider):
        name = "books"

    exporter = CsvExporter(path)
    if resume is not None:
        exporter.restore(resume)
    await exporter.open(SimpleNamespace(spider=Books()))  # type: ignore[arg-type]  # what an exporter reads of the crawl
    return exporter


async def test_csv_widened_after_a_checkpoint_is_cut_back_to_it_on_resume(tmp_path: Path) -> None:
    path = tmp_path / "books.csv"
    exporter = await open_csv(path)
    for n in range(3):
        await exporter.process_item({"isbn": str(n), "title": f"line\nbreak {n}"}, None)  # type: ignore[arg-type]
    saved = exporter.checkpoint()
    at_checkpoint = path.read_bytes()
    await exporter.process_item({"isbn": "3", "title": "t", "price": 1.5}, None)  # type: ignore[arg-type]
    assert csv_rows(path)[3] == {"isbn": "3", "title": "t", "price": "1.5"}
    assert csv_rows(path)[0] == {"isbn": "0", "title": "line\nbreak 0", "price": ""}  # widened in place
    assert path.read_bytes() != at_checkpoint
    await exporter.close()  # the crawl is killed here (a CSV has no footer)
    resumed = await open_csv(path, saved)
    assert path.read_bytes() == at_checkpoint  # exactly the checkpoint's file: its header, its rows
    await resumed.process_item({"isbn": "3", "title": "t", "price": 1.5}, None)  # type: ignore[arg-type]
    await resumed.close()
    rows = csv_rows(path)
    assert [row["isbn"] for row in rows] == ["0", "1", "2", "3"] and rows[3]["price"] == "1.5"
    assert json.dumps(rows[0]) == json.dumps({"isbn": "0", "title": "line\nbreak 0", "price": ""})
