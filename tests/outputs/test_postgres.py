"""PostgreSQL as an output, against a real server (Debian's ``postgresql``) and real ``eclaw crawl`` runs:
rows upserted with typed columns, a re-run updating without duplicates, SIGKILL + ``--state`` resume
storing each item exactly once, bad destinations refused before any download, and a server stopped
mid-crawl then started again losing nothing."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import shlex
import sqlite3
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.exceptions import ConfigError
from eclaw.items import Item
from eclaw.outputs.build import output_for
from eclaw.testing import collect, serve
from tests.inprocess import eclaw_inprocess
from tests.outputs.forked import Child, start_forked
from tests.outputs.pg_template import copied_postgres_server
from tests.outputs.postgres_server import PASSWORD, PostgresServer, free_port
from tests.outputs.state_part import SPIDER as STATE_SPIDER
from tests.outputs.state_part import expected, make_app

ROOT = Path(__file__).parents[2]
HERE = str(Path(__file__))
DOC = ROOT / "docs" / "postgres.md"


@dataclass
class Product(Item):
    key = ("sku",)
    sku: str
    price: float
    stock: int
    on_sale: bool
    seen: dt.datetime
    tags: list[str] = field(default_factory=list)
    note: str | None = None


class ProductSpider(Spider):
    """Products 0..19 from ``/p/N``; the ``bump`` argument raises the price of the even ones."""

    name = "products"
    custom_settings = {"retries": 0}

    def __init__(self, base_url: str = "http://127.0.0.1:1", bump: str = "0", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url, self.bump = base_url, float(bump)

    def start_requests(self) -> Any:
        for n in range(20):
            yield Request(f"{self.base_url}/p/{n}", callback=self.parse_product)

    def parse_product(self, response: Response) -> Any:
        n = int(response.url.rsplit("/", 1)[1])
        yield Product(
            sku=f"sku-{n}",
            price=10.0 + n + (self.bump if n % 2 == 0 else 0),
            stock=n * 3,
            on_sale=n % 3 == 0,
            seen=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
            tags=["a", str(n)],
        )


class Counter:
    """A site counting its requests (``/p/N`` for any N)."""

    def __init__(self) -> None:
        self.requests = 0
        self.app = web.Application()
        self.app.router.add_get("/p/{n}", self.page)

    async def page(self, request: web.Request) -> web.Response:
        self.requests += 1
        return web.Response(text="<h1>product</h1>", content_type="text/html")


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    directory = Path(tempfile.mkdtemp(prefix="eclaw-pg-"))  # not under pytest's 0700 tmp: the postgres user reads it
    try:
        with copied_postgres_server(directory) as server:  # initdb's work done once per machine
            yield server
    finally:
        close_polling()
        subprocess.run(["rm", "-rf", str(directory)], check=False)


@asynccontextmanager
async def site() -> AsyncIterator[tuple[str, Counter]]:
    counter = Counter()
    async with serve(counter.app) as base:
        yield base, counter


async def start(args: list[str], cwd: Path) -> Child:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return await start_forked("crawl", *args, "-s", "store=", "--log-level", "WARNING", cwd=cwd, env=env)


async def crawl(args: list[str], cwd: Path, status: int = 0) -> str:
    process = await start(args, cwd)
    try:
        _, err = await asyncio.wait_for(process.communicate(), 120)
    finally:
        process.close()
    assert process.returncode == status, err.decode()[-3000:]
    return err.decode()


async def wait_for(condition: Callable[[], bool], seconds: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await asyncio.to_thread(condition):
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


_polling: dict[int, Any] = {}  # a connection kept for the polls of count(), by server port


def count(pg: PostgresServer, table: str) -> int:
    """The rows of ``table`` (0 if it does not exist yet, or the server is away), over one connection
    kept between polls (a new one each 50 ms is a password exchange and a server process each time)."""
    import psycopg

    try:
        if pg.port not in _polling:
            _polling[pg.port] = psycopg.connect(pg.url(), autocommit=True)
        with _polling[pg.port].cursor() as cursor:
            return int(cursor.execute(f"SELECT count(*) FROM {table}".encode()).fetchone()[0])
    except psycopg.errors.UndefinedTable:  # not created yet
        return 0
    except psycopg.Error:  # the server stopped: a new connection next time
        close_polling()
        return 0


def close_polling() -> None:
    while _polling:
        _polling.popitem()[1].close()


def doc_command(pg: PostgresServer, table: str) -> list[str]:
    """The ``eclaw crawl`` line of docs/postgres.md, pointed at the test server and spider."""
    line = next(line for line in DOC.read_text().splitlines() if line.startswith("$ eclaw crawl"))
    line = line.replace("127.0.0.1:5432/shop", f"127.0.0.1:{pg.port}/eclaw").replace("table=products", f"table={table}")
    args = shlex.split(line)[4:]  # after "$ eclaw crawl products.py"
    return [HERE + ":ProductSpider", *args]


async def inprocess(args: list[str], status: int = 0) -> str:
    """``eclaw crawl ARGS`` in this test process (no process to start, psycopg imported once), for the
    tests about what it stores or says, not about its process: what it said on stderr."""
    code, _, err = await eclaw_inprocess("crawl", *args, "-s", "store=", "--log-level", "WARNING")
    assert code == status, err[-3000:]
    return err


async def test_items_upserted_with_typed_columns(pg: PostgresServer) -> None:
    async with site() as (base, _):
        await inprocess([*doc_command(pg, "products"), "-a", f"base_url={base}"])
        first = pg.sql("SELECT sku, price, stock, on_sale, seen, tags, note, data FROM products ORDER BY sku", "eclaw")
        assert len(first) == 20
        sku, price, stock, on_sale, seen, tags, note, data = first[0]
        assert (sku, price, stock, on_sale, tags, note, data) == ("sku-0", 10.0, 0, True, ["a", "0"], None, {})
        assert seen == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
        types = dict(pg.sql("SELECT column_name, data_type FROM information_schema.columns"
                            " WHERE table_name = 'products'", "eclaw"))  # fmt: skip
        assert types == {
            "sku": "text", "price": "double precision", "stock": "bigint", "on_sale": "boolean",
            "seen": "timestamp with time zone", "tags": "jsonb", "note": "text", "data": "jsonb",
        }  # fmt: skip
        odd_before = pg.sql("SELECT xmin FROM products WHERE sku = 'sku-1'", "eclaw")
        await inprocess([*doc_command(pg, "products"), "-a", f"base_url={base}", "-a", "bump=100"])
    rows = dict(pg.sql("SELECT sku, price FROM products", "eclaw"))
    assert len(rows) == 20  # no duplicates
    assert rows["sku-2"] == 112.0 and rows["sku-1"] == 11.0  # the changed rows updated, the others not
    assert pg.sql("SELECT xmin FROM products WHERE sku = 'sku-1'", "eclaw") == odd_before  # unchanged: not rewritten


async def test_sigkill_then_resume_stores_each_item_once(pg: PostgresServer, tmp_path: Path) -> None:
    table = "pages_resumed"
    url = pg.url() + f"?table={table}&batch=5"  # rows are committed between checkpoints too
    args = [STATE_SPIDER, "--state", str(tmp_path / "state"), "-o", url, "-s", "checkpoint_interval=1"]
    async with serve(make_app(0.08)) as base:
        for threshold in (50, 120):  # of the 194 items
            process = await start([*args, "-a", f"base_url={base}"], tmp_path)
            await wait_for(lambda threshold=threshold: count(pg, table) >= threshold)  # type: ignore[misc]
            process.kill()  # SIGKILL: no clean-up of any kind
            await process.wait()
        await crawl([*args, "-a", f"base_url={base}"], tmp_path)
    parsed, _ = expected()
    pages = [int(row[0]) for row in pg.sql(f"SELECT data->>'page' FROM {table}", "eclaw")]  # type: ignore[call-overload]
    assert len(pages) == len(set(pages)), "an item stored twice"
    assert set(pages) == parsed


@pytest.mark.parametrize(
    ("what", "reason"),
    [
        ("unreachable", "Connection refused"),
        ("password", "password authentication failed"),
        ("database", 'database "nope" does not exist'),
        ("schema", "cannot create table nope.items"),
        ("create=0", "table missing does not exist (create=0)"),
    ],
)
async def test_bad_destination_exits_2_before_any_download(pg: PostgresServer, what: str, reason: str) -> None:
    url = {
        "unreachable": pg.url(port=free_port()) + "?table=items",
        "password": pg.url(password="wrong-pw") + "?table=items",
        "database": pg.url("nope") + "?table=items",
        "schema": pg.url() + "?table=nope.items",
        "create=0": pg.url() + "?table=missing&create=0",
    }[what]
    async with site() as (base, counter):
        err = await inprocess([HERE + ":ProductSpider", "-a", f"base_url={base}", "-o", url], status=2)
        assert counter.requests == 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert reason in lines[0] and "postgresql://eclaw:***@127.0.0.1" in lines[0], lines[0]
    assert PASSWORD not in err and "wrong-pw" not in err


async def test_server_stopped_mid_crawl_then_back_delivers_every_item(pg: PostgresServer, tmp_path: Path) -> None:
    table = "pages_outage"
    spool = tmp_path / "eclaw-data" / f"state-site.{table}.pgspool"
    async with serve(make_app(0.2)) as base:  # a crawl of ~5 s: the server is back before its end
        process = await start([STATE_SPIDER, "-a", f"base_url={base}", "-o", pg.url() + f"?table={table}"], tmp_path)
        try:
            await wait_for(lambda: count(pg, table) >= 30)
            await asyncio.to_thread(pg.stop)
            await wait_for(spool.exists)  # rows the server could not take wait there
            await asyncio.to_thread(pg.start)
            _, err = await asyncio.wait_for(process.communicate(), 120)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 0, err.decode()[-3000:]
    failures = [line for line in err.decode().splitlines() if "cannot deliver rows" in line]
    assert len(failures) == 1 and "postgresql://eclaw:***@" in failures[0], err.decode()[-3000:]
    parsed, _ = expected()
    pages = [int(row[0]) for row in pg.sql(f"SELECT data->>'page' FROM {table}", "eclaw")]  # type: ignore[call-overload]
    assert len(pages) == len(set(pages)) and set(pages) == parsed
    assert not spool.exists()


class KeyedPages(Spider):
    """Dict items keyed by ``page`` (the spider's ``item_key``): a text key column, the rest in ``data``."""

    name = "keyed-pages"
    item_key = ("page",)
    custom_settings = {"retries": 0}

    def __init__(self, base_url: str = "http://127.0.0.1:1", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = base_url

    def start_requests(self) -> Any:
        for n in range(10):
            yield Request(f"{self.base_url}/p/{n}", callback=self.parse_page)

    def parse_page(self, response: Response) -> Any:
        yield {"page": response.url.rsplit("/", 1)[1], "size": len(response.body)}


async def test_dict_items_upserted_by_the_spiders_item_key(pg: PostgresServer, tmp_path: Path) -> None:
    output = pg.url() + "?table=keyed"
    settings = Settings(store="", dead_letter=str(tmp_path / "dead.jsonl"), state_dir="")
    async with site() as (base, _):
        for _ in range(2):
            _, stats = await collect(KeyedPages, engine=Engine(settings, outputs=[output]), base_url=base)
            assert stats.clean and stats.finish_reason == "finished"
    rows = pg.sql("SELECT page, data FROM keyed ORDER BY page", "eclaw")
    assert rows == [(str(n), {"size": 16}) for n in range(10)]
    assert stats.counters["postgres unchanged"] == 10


async def test_existing_table_that_does_not_fit_is_named_and_items_dead_lettered(
    pg: PostgresServer, tmp_path: Path
) -> None:
    pg.sql("CREATE TABLE clash (sku bigint PRIMARY KEY, data jsonb)", "eclaw")
    log, dead = tmp_path / "crawl.log", tmp_path / "dead.jsonl"
    settings = Settings(store="", dead_letter=str(dead), log_file=str(log))
    async with site() as (base, _):
        engine = Engine(settings, outputs=[pg.url() + "?table=clash"])
        _, stats = await collect(ProductSpider, engine=engine, base_url=base)
    refused = [line for line in log.read_text().splitlines() if "rows refused" in line]
    assert len(refused) == 1 and "column 'sku' is bigint, the item field is text" in refused[0]
    assert "postgresql://eclaw:***@" in refused[0]
    assert PASSWORD not in log.read_text() and PASSWORD not in dead.read_text()
    assert sum(stats.items_dead_lettered.values()) == 20
    assert len(dead.read_text().splitlines()) == 20
    assert count(pg, "clash") == 0


def checkpointed_spool(state: Path) -> bool:
    """A checkpoint of the crawl in ``state`` recorded rows waiting in the postgres output's spool."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{state / 'state.sqlite'}?mode=ro", uri=True)) as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'outputs'").fetchone()
    except sqlite3.Error:
        return False
    saved = json.loads(row[0]) if row else {}
    return any(info.get("spool_end", 0) > info.get("spool_done", 0) for info in saved.values())


async def test_server_away_then_sigkill_then_resume_delivers_the_spool_once(pg: PostgresServer, tmp_path: Path) -> None:
    table, state = "pages_spooled", tmp_path / "state"
    args = [STATE_SPIDER, "--state", str(state), "-o", pg.url() + f"?table={table}", "-s", "checkpoint_interval=0.2"]
    async with serve(make_app(0.15)) as base:
        process = await start([*args, "-a", f"base_url={base}"], tmp_path)
        try:
            await wait_for(lambda: count(pg, table) >= 30)
            await asyncio.to_thread(pg.stop)
            await wait_for(lambda: checkpointed_spool(state))
        finally:
            process.kill()  # SIGKILL while rows wait in the spool
            await process.wait()
            await asyncio.to_thread(pg.start)
        await crawl([*args, "-a", f"base_url={base}"], tmp_path)
    parsed, _ = expected()
    pages = [int(row[0]) for row in pg.sql(f"SELECT data->>'page' FROM {table}", "eclaw")]  # type: ignore[call-overload]
    assert len(pages) == len(set(pages)), "an item stored twice"
    assert set(pages) == parsed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("postgresql://u:pw@127.0.0.1/db", "name the table (?table=NAME)"),
        ("postgres://u:pw@127.0.0.1/db?table=a;drop", "bad table name 'a;drop'"),
        ("postgresql://u:pw@127.0.0.1/db?table=a.b.c", "bad table name 'a.b.c'"),
        ("postgresql://u:pw@127.0.0.1/db?table=t&create=maybe", "create='maybe' (use 1 or 0)"),
        ("postgresql://u:pw@127.0.0.1/db?table=t&batch=0", "batch='0'"),
    ],
)
def test_bad_spec_is_one_clear_line_without_the_password(spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        output_for(spec, "spider")
    assert message in str(caught.value) and ":pw@" not in str(caught.value)
