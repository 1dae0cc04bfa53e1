"""Outputs read back: JSONL, JSON, CSV, Parquet (partitioned too), rotation, the SQLite store's upserts
and runs, data-quality warnings, and sinks that fail mid-crawl."""

from __future__ import annotations

import csv
import gc
import glob
import json
import sqlite3
import sys
import threading
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest
import pytest_asyncio

from eclaw import ConfigError, Engine, Request, Response, Settings, Spider
from eclaw.cli import main as cli_main
from eclaw.demo.shop import ShopSpider
from eclaw.demo.site import expected_products
from eclaw.items import Item
from eclaw.outputs.build import output_for as exporter_for
from eclaw.storage import sqlite
from eclaw.storage.store import SqliteStore, list_runs
from eclaw.testing import collect, demo_site
from tests.conftest import assert_accounted, read_bytes, read_csv, read_jsonl, record_file

FIELDS = ["sku", "title", "price", "category", "in_stock", "rating", "url"]


def products() -> dict[str, dict[str, Any]]:
    return {p["sku"]: p for p in expected_products()}


def check_rows(rows: list[dict[str, Any]], numbers: bool = True) -> None:
    wanted = products()
    assert len(rows) == len(wanted) == len({r["sku"] for r in rows})
    for row in rows:
        want = wanted[row["sku"]]
        if numbers:
            assert (row["title"], row["price"], row["rating"], row["in_stock"]) == (
                want["title"],
                want["price"],
                want["rating"],
                want["in_stock"],
            )
        else:  # CSV: strings
            assert (row["title"], float(row["price"]), int(row["rating"])) == (
                want["title"],
                want["price"],
                want["rating"],
            )


async def crawl_shop(
    demo_url: str, outputs: list[Any], spider: type[Spider] = ShopSpider, store: str | None = None, **settings: Any
) -> Any:
    engine = Engine(Settings(**settings), outputs=outputs, store=store)
    _, stats = await collect(spider, engine=engine, base_url=demo_url)
    assert_accounted(stats)
    return stats


SHOP: list[dict[str, Any]] = []  # the items of one crawl of the demo shop (the shop_items fixture fills it)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shop_items(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The 500 items one real crawl of the demo shop stored, in their order: what :class:`ShopItems` yields
    again, for the tests whose subject is what outputs and the store do with items, run after run (a
    crawl of the shop itself for each run cost ~0.3 s of CPU)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("shop"))  # the crawl's files of record, if any
        async with demo_site() as base:
            items, stats = await collect(ShopSpider, settings=Settings(store=""), base_url=base)
    assert_accounted(stats)
    check_rows(items)
    SHOP[:] = items
    return SHOP


async def _one_page(request: Request, call_next: Any) -> Response:
    return Response(request.url, body=b"<html></html>", request=request)


class ShopItems(Spider):
    """The demo shop's items (:data:`SHOP`) again, from the one page of a fake site, as spider ``shop``."""

    name = "shop"
    start_urls = ["http://127.0.0.1:9/"]
    middlewares = [_one_page]

    def parse(self, response: Response) -> Any:
        yield from (dict(item) for item in SHOP)


async def store_shop(
    outputs: list[Any], spider: type[Spider] = ShopItems, store: str | None = None, **settings: Any
) -> Any:
    """A run of ``spider`` (the shop's items, by default) into ``outputs`` and ``store``: its stats."""
    assert SHOP, "needs the shop_items fixture"
    engine = Engine(Settings(**settings), outputs=outputs, store=store)
    _, stats = await collect(spider, engine=engine)
    assert_accounted(stats)
    return stats


async def test_every_format_reads_back(demo_url: str, tmp_path: Path) -> None:
    outputs = [f"{tmp_path}/{{spider}}.jsonl", f"{tmp_path}/all.json", f"{tmp_path}/all.csv", f"{tmp_path}/all.parquet"]
    stats = await crawl_shop(demo_url, outputs)
    assert stats.items_stored == 500
    check_rows(read_jsonl(tmp_path / "shop.jsonl"))
    check_rows(json.loads((tmp_path / "all.json").read_text()))
    with (tmp_path / "all.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == FIELDS  # the item's own key order, stable
        check_rows(list(reader), numbers=False)
    table = pq.read_table(tmp_path / "all.parquet")
    assert table.schema.field("price").type == "double" and table.schema.field("rating").type == "int64"
    check_rows(table.to_pylist())


async def test_partitioned_parquet_is_a_hive_directory(shop_items: list[Any], tmp_path: Path) -> None:
    await store_shop([f"{tmp_path}/parts.parquet"], output_partition_by="category")
    folders = sorted(p.name for p in (tmp_path / "parts.parquet").iterdir())
    assert folders == sorted(f"category={c}" for c in {p["category"] for p in expected_products()})
    rows = pq.read_table(tmp_path / "parts.parquet", partitioning="hive").to_pylist()
    check_rows(rows)
    assert {r["category"] for r in rows} == {p["category"] for p in expected_products()}


async def test_rotation_and_placeholders(shop_items: list[Any], tmp_path: Path) -> None:
    template = f"{tmp_path}/{{spider}}-{{run_key}}-%(batch)03d.jsonl"
    await store_shop([template], output_batch_items=120, run_key="r1")
    files = sorted(Path(f) for f in glob.glob(f"{tmp_path}/shop-r1-*.jsonl"))
    assert [f.name for f in files] == [f"shop-r1-{n:03d}.jsonl" for n in range(1, 6)]
    assert [len(read_jsonl(f)) for f in files] == [120, 120, 120, 120, 20]
    check_rows([row for f in files for row in read_jsonl(f)])
    await store_shop([f"{tmp_path}/by-size-%(batch)d.csv"], output_batch_bytes=10_000)
    parts = sorted(glob.glob(f"{tmp_path}/by-size-*.csv"), key=lambda f: int(f.rsplit("-", 1)[1][:-4]))
    sizes = [len(read_bytes(f)) for f in parts]
    assert len(parts) >= 5 and all(10_000 <= size < 10_400 for size in sizes[:-1])
    check_rows([row for part in parts for row in read_csv(part)], numbers=False)  # each part has its header
    with pytest.raises(ConfigError, match="needs output_batch_items"):
        exporter_for(f"{tmp_path}/x-%(batch)d.jsonl")
    with pytest.raises(ConfigError, match="only Parquet outputs can be partitioned"):
        Engine(Settings(output_partition_by="category"), outputs=[f"{tmp_path}/x.csv"])
    with pytest.raises(ConfigError, match="placeholder"):
        Engine(outputs=[f"{tmp_path}/{{nope}}.jsonl"])


def store_rows(path: Path) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT type, key, json_extract(data, '$.price') FROM items ORDER BY key").fetchall()


class KeyedShop(ShopItems):
    item_key = ("sku",)


class RepricedShop(KeyedShop):
    def parse(self, response: Response) -> Any:
        for value in super().parse(response):
            yield {**value, "price": value["price"] + 1} if value["rating"] == 5 else value


async def test_store_upserts_on_the_key_across_runs(shop_items: list[Any], tmp_path: Path) -> None:
    path = tmp_path / "shop.sqlite"
    first = await store_shop([str(path)], KeyedShop)
    assert first.counters["store inserted"] == 500
    second = await store_shop([str(path)], KeyedShop)
    assert second.counters["store unchanged"] == 500 and second.counters["store inserted"] == 0
    fives = sum(1 for p in expected_products() if p["rating"] == 5)
    third = await store_shop([str(path)], RepricedShop)
    assert third.counters["store updated"] == fives and third.counters["store unchanged"] == 500 - fives
    rows = store_rows(path)
    assert len(rows) == 500 and {r[0] for r in rows} == {"dict"}
    wanted = products()
    for _, sku, price in rows:
        bump = 1 if wanted[sku]["rating"] == 5 else 0
        assert price == pytest.approx(wanted[sku]["price"] + bump)


async def test_keyless_items_are_replaced_per_run_key(shop_items: list[Any], tmp_path: Path) -> None:
    path = tmp_path / "shop.sqlite"
    await store_shop([str(path)])
    await store_shop([str(path)])
    assert len(store_rows(path)) == 500  # the same run key: replaced, not appended
    await store_shop([str(path)], run_key="2026-11-30")
    assert len(store_rows(path)) == 1000  # another run key keeps its own copy


async def test_runs_are_recorded_and_listed(
    shop_items: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "{spider}.sqlite")
    await store_shop([store], store=store)
    await store_shop([store], store=store, run_key="b")
    runs = list_runs(tmp_path / "shop.sqlite")
    assert [(r["spider"], r["run_key"], r["finish_reason"]) for r in runs] == [
        ("shop", "b", "finished"),
        ("shop", "default", "finished"),
    ]
    assert runs[0]["stats"]["items_stored"] == 500 and len(runs[0]["settings_digest"]) == 12
    assert cli_main(["runs", str(tmp_path / "shop.sqlite")]) == 0
    out = capsys.readouterr().out
    assert out.count(" shop ") == 2 and "finished" in out
    assert cli_main(["runs", str(tmp_path / "none.sqlite")]) == 2


class FewShop(ShopItems):
    """Only the first category, with the price as text and one field always missing."""

    required_fields = ("sku", "title", "weight")

    def parse(self, response: Response) -> Any:
        for value in super().parse(response):
            if value["category"] == "books":
                yield {**value, "price": str(value["price"])}


async def test_data_quality_warnings_against_the_previous_run(shop_items: list[Any], tmp_path: Path) -> None:
    store = str(tmp_path / "{spider}.sqlite")
    first = await store_shop([store], store=store)
    assert first.quality == []
    few = await store_shop([store], FewShop, store=store)
    assert few.items_stored < 100
    text = "\n".join(few.quality)
    assert f"dict: {few.items_stored} items, 500 in the previous run" in text
    assert "field 'price' changed type: float -> str" in text
    assert "required field 'weight' is empty in 100% of items" in text
    assert "quality warning" in few.summary()
    (run, *_) = list_runs(tmp_path / "shop.sqlite")
    assert run["warnings"] == few.quality


@dataclass
class Product(Item):
    key = ("sku",)
    sku: str
    price: float
    tags: list[str] = field(default_factory=list)
    note: str | None = None


async def run_items(items: list[Any], outputs: list[Any], store: str | None = None) -> Any:
    """A crawl of one fake page whose callback yields ``items``."""

    async def respond(request: Request, call_next: Any) -> Response:
        return Response(request.url, body=b"<html></html>", request=request)

    class FromList(Spider):
        name = "typed"
        start_urls = ["http://127.0.0.1:9/"]
        middlewares = [respond]

        def parse(self, response: Response) -> Any:
            yield from items

    engine = Engine(outputs=outputs, store=store)
    _, stats = await collect(FromList, engine=engine)
    assert_accounted(stats)
    return stats


async def test_declared_items_are_validated_and_keyed(tmp_path: Path) -> None:
    good = [Product("a", 1.5, ["x"]), Product("b", 2)]
    bad = [Product("c", "cheap"), Product(None, 3.0)]  # type: ignore[arg-type]
    stats = await run_items(good + bad, [str(tmp_path / "t.sqlite"), str(tmp_path / "t.csv")])
    assert stats.items_stored == 2
    assert stats.items_dropped_by_reason == {
        "invalid: field 'price' must be float, got str": 1,
        "invalid: field 'sku' is required": 1,
    }
    dead = read_jsonl(record_file("typed", "dead-letter"))
    assert [d["stage"] for d in dead] == ["validation", "validation"] and dead[0]["item"]["sku"] == "c"
    assert stats.items_dead_lettered == {"validation": 2} and not stats.clean
    with closing(sqlite3.connect(tmp_path / "t.sqlite")) as db:
        assert db.execute("SELECT type, key FROM items ORDER BY key").fetchall() == [("Product", "a"), ("Product", "b")]
    with (tmp_path / "t.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert rows[0] == {"sku": "a", "price": "1.5", "tags": '["x"]', "note": ""}  # nested values as JSON


async def test_pydantic_models_are_items(tmp_path: Path) -> None:
    pydantic = pytest.importorskip("pydantic")

    class Review(pydantic.BaseModel):
        stars: int

    bad = Review.model_construct(stars="many")  # skips validation: caught before the pipelines
    stats = await run_items([Review(stars=4), bad], [str(tmp_path / "r.jsonl")])
    assert stats.items_stored == 1 and read_jsonl(tmp_path / "r.jsonl") == [{"stars": 4}]
    (reason,) = stats.items_dropped_by_reason
    assert reason.startswith("invalid: field 'stars': Input should be a valid integer")


async def test_failing_file_sink_dead_letters_every_item(demo_url: str, tmp_path: Path) -> None:
    full = tmp_path / "full.jsonl"
    full.symlink_to("/dev/full")  # every write fails with ENOSPC, as on a full disk
    stats = await crawl_shop(demo_url, [str(full), str(tmp_path / "ok.jsonl")])
    assert stats.items_stored == 500 and stats.items_dropped == 0
    assert stats.items_written == {str(tmp_path / "ok.jsonl"): 500, str(tmp_path / "full.jsonl"): 0}
    assert stats.items_dead_lettered == {str(full): 500} and not stats.clean
    dead = read_jsonl(record_file("shop", "dead-letter"))
    assert len(dead) == 500 and "No space left on device" in dead[0]["error"]
    assert {(d["stage"], d["name"], d["spider"]) for d in dead} == {("output", str(full), "shop")}
    check_rows([d["item"] for d in dead])  # nothing lost: every item is in the dead-letter file
    check_rows(read_jsonl(tmp_path / "ok.jsonl"))  # ... and the other output has every item all the same


class LockDuringCrawl:
    """Holds an exclusive lock on the store file from the first item on (another process would)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db: sqlite3.Connection | None = None

    async def open(self, crawl: Any) -> None:
        return None

    async def process_item(self, item: Any, spider: Spider) -> Any:
        if self.db is None:
            self.db = sqlite3.connect(self.path, isolation_level=None)
            self.db.execute("BEGIN EXCLUSIVE")
        return item

    async def close(self) -> None:
        if self.db is not None:
            self.db.close()


async def test_locked_store_dead_letters_its_batches(demo_url: str, tmp_path: Path) -> None:
    path = tmp_path / "locked.sqlite"
    store = SqliteStore(path, item_key=("sku",), busy_timeout=0.05)
    stats = await crawl_shop(demo_url, [LockDuringCrawl(path), store])
    assert stats.items_dead_lettered == {repr(store): 500} and stats.items_written[repr(store)] == 0
    dead = read_jsonl(record_file("shop", "dead-letter"))
    assert len(dead) == 500 and "locked" in dead[0]["error"]
    check_rows([d["item"] for d in dead])


async def test_a_store_that_cannot_be_opened_leaves_nothing_open(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError, match="not a database"):
        sqlite.connect(path, "")
    with pytest.raises(ConfigError, match=r"cannot open the store .*junk\.sqlite"):
        await SqliteStore(path).open(SimpleNamespace(spider=ShopSpider()))  # type: ignore[arg-type]
    gc.collect()  # an unclosed connection warns here: an error under filterwarnings on Python 3.13+
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("eclaw-store")]


def test_parquet_without_pyarrow_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ConfigError, match=r"Parquet output needs pyarrow: pip install 'eclaw\[parquet\]'"):
        Engine(outputs=[tmp_path / "x.parquet"])
