"""Every stream format x every compression round-trips (read back with the standard library and
zstandard), a member per checkpoint; SQLite and Parquet too; the spec's syntax and its errors."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web

from eclaw import Engine, Response
from eclaw.exceptions import ConfigError
from eclaw.outputs.build import output_for
from eclaw.outputs.spec import parse_spec
from eclaw.security.redact import Redactor
from eclaw.settings import Settings
from eclaw.spider import Spider
from eclaw.testing import serve
from tests.outputs.readback import read_rows

FORMATS = {"jsonl": ".jsonl", "json": ".json", "csv": ".csv"}
COMPRESSIONS = [None, "gz", "zst", "bz2", "xz"]
ITEMS = [{"n": n, "title": f"Zoë's book {n}", "price": n * 1.5} for n in range(30)]


class Books(Spider):
    name = "books"


CRAWL: Any = SimpleNamespace(spider=Books(), redactor=Redactor(), settings=Settings(), run_id="formats")


async def write(spec: str, items: list[dict[str, Any]], *, checkpoint_every: int = 0) -> None:
    output: Any = output_for(spec, "books")
    await output.open(CRAWL)
    for k, item in enumerate(items, 1):
        await output.process_item(dict(item), CRAWL.spider)
        if checkpoint_every and k % checkpoint_every == 0:
            await output.flush()
    await output.close()


def cells(rows: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    return [{k: str(v) for k, v in row.items()} for row in rows] if fmt == "csv" else rows


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("fmt", sorted(FORMATS))
async def test_every_format_and_compression_round_trips(tmp_path: Path, fmt: str, compression: str | None) -> None:
    name = "items" + FORMATS[fmt] + (f".{compression}" if compression else "")
    await write(str(tmp_path / name), ITEMS, checkpoint_every=7)  # several members
    assert read_rows(tmp_path / name, fmt, compression) == cells(ITEMS, fmt)


async def test_a_member_per_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl.gz"
    await write(str(path), ITEMS, checkpoint_every=10)
    assert path.read_bytes().count(b"\x1f\x8b\x08") >= 3  # members, each whole
    assert len(gzip.decompress(path.read_bytes()).splitlines()) == len(ITEMS)


def shop() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        rows = "".join(f'<li data-n="{n}">{item["title"]}</li>' for n, item in enumerate(ITEMS))
        return web.Response(text=f"<html><body><ul>{rows}</ul></body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    return app


class ShopSpider(Spider):
    name = "books"

    def parse(self, response: Response) -> Any:
        for li in response.css("li"):
            n = int(li.attrib["data-n"])
            yield {"n": n, "title": li.css("::text").get(), "price": n * 1.5}


async def test_a_crawl_writes_every_output_at_once(tmp_path: Path) -> None:
    """In a real crawl: every stream format and compression, SQLite and Parquet, each with every item."""
    specs = {f"items{FORMATS[f]}" + (f".{c}" if c else ""): (f, c) for f in FORMATS for c in COMPRESSIONS}
    specs |= {"items.sqlite": ("sqlite", None), "items.parquet": ("parquet", None)}
    engine = Engine(outputs=[str(tmp_path / name) for name in specs], overrides={"store": ""})
    async with serve(shop()) as base, engine:
        stats = await engine.crawl(ShopSpider, start_urls=[base + "/"])
    assert stats.items_stored == len(ITEMS)
    for name, (fmt, compression) in specs.items():
        rows = sorted(read_rows(tmp_path / name, fmt, compression), key=lambda row: int(row["n"]))
        assert rows == cells(ITEMS, fmt), name


async def test_the_outputs_setting(tmp_path: Path) -> None:
    engine = Engine(overrides={"store": "", "outputs": f"{tmp_path / 'a.jsonl.bz2'} {tmp_path / 'b.json'}"})
    async with serve(shop()) as base, engine:
        await engine.crawl(ShopSpider, start_urls=[base + "/"])
    assert len(read_rows(tmp_path / "a.jsonl.bz2", "jsonl", "bz2")) == len(read_rows(tmp_path / "b.json", "json"))
    assert len(read_rows(tmp_path / "b.json", "json")) == len(ITEMS)


async def test_an_explicit_format_and_url_forms(tmp_path: Path) -> None:
    await write(f"{tmp_path / 'items.txt'}:csv", ITEMS[:3])
    assert read_rows(tmp_path / "items.txt", "csv") == cells(ITEMS[:3], "csv")
    await write(f"file://{tmp_path / 'items.jl.xz'}", ITEMS[:3])
    assert read_rows(tmp_path / "items.jl.xz", "jsonl", "xz") == ITEMS[:3]


async def test_rotated_compressed_files(tmp_path: Path) -> None:
    output: Any = output_for(str(tmp_path / "items-%(batch)03d.csv.gz"), "books", batch_items=10)
    await output.open(CRAWL)
    for item in ITEMS:
        await output.process_item(dict(item), CRAWL.spider)
    await output.close()
    files = [tmp_path / f"items-00{k}.csv.gz" for k in (1, 2, 3)]
    assert [row for f in files for row in read_rows(f, "csv", "gz")] == cells(ITEMS, "csv")
    assert not (tmp_path / "items-004.csv.gz").exists()


@pytest.mark.parametrize(
    "text, scheme, location, fmt, compression",
    [
        ("items.jsonl.gz", "file", "items.jsonl.gz", "jsonl", "gz"),
        ("out/{spider}.csv.zst", "file", "out/{spider}.csv.zst", "csv", "zst"),
        ("-", "stdout", "-", "jsonl", None),
        ("-:csv", "stdout", "-", "csv", None),
        ("stdout:csv", "stdout", "-", "csv", None),
        ("stdout:", "stdout", "-", "jsonl", None),
        ("file:///tmp/a.json.bz2", "file", "/tmp/a.json.bz2", "json", "bz2"),
        ("items-%(batch)05d.jl.xz", "file", "items-%(batch)05d.jl.xz", "jsonl", "xz"),
        ("data.db", "file", "data.db", "sqlite", None),
    ],
)
def test_spec_parsing(text: str, scheme: str, location: str, fmt: str, compression: str | None) -> None:
    spec = parse_spec(text)
    assert (spec.scheme, spec.location, spec.format, spec.compression) == (scheme, location, fmt, compression)


@pytest.mark.parametrize(
    "text, message",
    [
        ("items.txt", "unsupported output format '.txt'"),
        ("items.gz", "unsupported output format '(none)'"),
        ("items.jsonl:yaml", "unknown output format 'yaml' (known: csv, json, jsonl, "),
        ("nosuch://bucket/items.jsonl", "unknown output destination (URL scheme) 'nosuch' (known: "),
        ("items.sqlite.gz", "the sqlite format takes no compression (.gz)"),
    ],
)
def test_bad_specs_are_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        output_for(text)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


async def test_compressed_csv_columns_are_fixed_and_a_new_field_is_refused(tmp_path: Path) -> None:
    output: Any = output_for(f"file://{tmp_path / 'items.csv.gz'}?fields=n,title", "books")
    await output.open(CRAWL)
    await output.process_item({"n": 1, "title": "a"}, CRAWL.spider)
    with pytest.raises(ValueError, match="the item's price has no column"):
        await output.process_item({"n": 2, "title": "b", "price": 3}, CRAWL.spider)  # dead-lettered by the crawl
    await output.process_item({"n": 3}, CRAWL.spider)
    await output.close()
    assert read_rows(tmp_path / "items.csv.gz", "csv", "gz") == [{"n": "1", "title": "a"}, {"n": "3", "title": ""}]


@pytest.mark.parametrize("compression", ["gz", "zst", None])
def test_a_full_disk_dead_letters_and_leaves_a_whole_file(tmp_path: Path, compression: str | None) -> None:
    """Past the size limit, nothing half-written: the file reads back whole, and every item is in it
    or dead-lettered, none both."""
    name = "items.jsonl" + (f".{compression}" if compression else "")
    spec = f"file://{tmp_path / name}"  # a URL: through the stream writer, even uncompressed
    result = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("fill_disk.py")), spec, str(40_000), "6000"],
        capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(Path(__file__).parents[2])},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    dead = json.loads(result.stdout)["dead"]
    written = [row["n"] for row in read_rows(tmp_path / name, "jsonl", compression)]
    assert dead and written  # the limit was reached, after some items
    assert sorted(written + dead) == list(range(6000))
