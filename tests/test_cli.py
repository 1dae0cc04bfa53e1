"""The command line: what a command does, run in-process (tests/inprocess.py: no new Python to
import eclaw, ~0.35 s of CPU a command); what is about its process (signals, the exit of ``python -m
eclaw``, what it imports at start) as a real process, forked from the warm fork server
(tests/forkserver.py) or, for what a fresh interpreter does, a new Python."""

from __future__ import annotations

import asyncio
import csv
import importlib.metadata
import io
import json
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing, redirect_stderr, redirect_stdout
from pathlib import Path

import aiohttp
import pytest

from eclaw.cli.main import main
from eclaw.testing import serve
from tests.forkserver import PIPE, Child, spawn
from tests.inprocess import kept_logging
from tests.sites import SlowSite

ROOT = Path(__file__).resolve().parent.parent
SHOP = str(ROOT / "spiders" / "shop.py")


async def eclaw(*args: str, wait: float = 60) -> tuple[int, str, str]:
    """``eclaw ARGS`` in-process (in a thread, the sites it crawls served by the test's loop): its exit
    code, stdout and stderr; argparse's usage errors (a ``SystemExit``) give their code too."""
    out, err = io.StringIO(), io.StringIO()

    def run() -> int:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                return main(list(args))
            except SystemExit as exc:
                return exc.code if isinstance(exc.code, int) else 1

    with kept_logging():
        code = await asyncio.wait_for(asyncio.to_thread(run), wait)
    return code, out.getvalue(), err.getvalue()


async def test_crawl_writes_csv_and_jsonl_at_once_and_prints_stats(demo_url: str, tmp_path: Path) -> None:
    csv_out, jsonl_out = tmp_path / "a.csv", tmp_path / "b.jsonl"
    code, stdout, stderr = await eclaw(
        "crawl",
        f"{SHOP}:ShopSpider",
        "-a",
        f"base_url={demo_url}",
        "-o",
        str(csv_out),
        "-o",
        str(jsonl_out),
        "-s",
        "CONCURRENCY=8",
        "--log-level",
        "WARNING",
    )
    assert code == 0, stderr
    rows = [json.loads(line) for line in jsonl_out.read_text().splitlines()]
    assert len(rows) == len({row["sku"] for row in rows}) == 500
    with csv_out.open(newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 500
    assert list(table[0]) == ["sku", "title", "price", "category", "in_stock", "rating", "url"]
    assert re.search(r"finish reason\s+finished", stdout)
    assert stdout.splitlines()[-1] == f"wrote 500 items to {csv_out}, 500 to {jsonl_out}"


async def test_without_output_items_go_to_the_store_and_runs_are_listed(demo_url: str, tmp_path: Path) -> None:
    spider = write(tmp_path, "pages.py", PAGES)  # five pages of the shop: the store, not the shop, is tested
    given = ",".join(f"{demo_url}/product/{n}" for n in range(1, 6))
    for _ in range(2):
        code, stdout, stderr = await eclaw("crawl", spider, "-a", f"start_urls={given}", "--log-level", "WARNING")
        assert code == 0, stderr
        assert "wrote 5 items to eclaw-data/pages.sqlite" in stdout
    with closing(sqlite3.connect(tmp_path / "eclaw-data" / "pages.sqlite")) as db:
        assert db.execute("SELECT count(*), count(DISTINCT json_extract(data, '$.url')) FROM items").fetchone() == (
            5,
            5,
        )  # the second run replaced the first (same run key), no second copy
    code, stdout, _ = await eclaw("runs")
    assert code == 0
    lines = stdout.splitlines()
    assert len(lines) == 3 and all(" pages " in line and " finished " in line for line in lines[1:])
    code, stdout, _ = await eclaw("runs", "pages")
    assert code == 0 and len(stdout.splitlines()) == 3
    code, _, stderr = await eclaw("runs", "nosuchspider")
    assert code == 2 and "no store at eclaw-data/nosuchspider.sqlite" in stderr


async def test_spider_arguments_give_lists(demo_url: str, tmp_path: Path) -> None:
    spider = write(tmp_path, "pages.py", PAGES)
    for given in (f"{demo_url}/about,{demo_url}/category/books", f'["{demo_url}/about", "{demo_url}/category/books"]'):
        out = tmp_path / "pages.jsonl"
        code, _, stderr = await eclaw("crawl", spider, "-a", f"start_urls={given}", "-o", str(out), "-q")
        assert code == 0, stderr
        assert sorted(json.loads(line)["url"] for line in out.read_text().splitlines()) == [
            f"{demo_url}/about",
            f"{demo_url}/category/books",
        ]


PAGES = """
from eclaw import Spider
class Pages(Spider):
    name = "pages"
    start_urls = []
    def parse(self, response):
        yield {"url": response.url}
"""


async def test_list_and_version() -> None:
    code, stdout, _ = await eclaw("list", SHOP)
    assert code == 0 and stdout.strip() == f"shop\t{SHOP}:ShopSpider"
    code, stdout, _ = await eclaw("version")
    assert code == 0 and stdout.startswith("eclaw 0.")


def write(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


SPIDER = """
from eclaw import Request, Spider
class A(Spider):
    name = "a"
    start_urls = ["http://127.0.0.1:9/"]
"""


START_REQUESTS_TYPO = """start_urls = []
    async def start_requests(self):
        yield Request("htps://127.0.0.1:9/")"""


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({}, ["crawl", "{tmp}/missing.py"], "spider file not found"),
        ({"empty.py": "x = 1\n"}, ["crawl", "{tmp}/empty.py"], "no Spider subclass found in"),
        (
            {"broken.py": "import not_a_module_anywhere\n"},
            ["crawl", "{tmp}/broken.py"],
            "error importing {tmp}/broken.py line 1: ModuleNotFoundError",
        ),
        (
            {"syntax.py": "def (:\n"},
            ["crawl", "{tmp}/syntax.py"],
            "error importing {tmp}/syntax.py line 1: SyntaxError",
        ),
        (
            {"s.py": SPIDER},
            ["crawl", "{tmp}/s.py", "-s", "CONCURENCY=3"],
            "unknown setting 'CONCURENCY' (did you mean 'concurrency'?)",
        ),
        (
            {"s.py": SPIDER},
            ["crawl", "{tmp}/s.py", "-s", "concurrency=lots"],
            "setting 'concurrency' must be an integer",
        ),
        ({"s.py": SPIDER}, ["crawl", "{tmp}/s.py", "-s", "concurrency"], "-s expects KEY=VALUE"),
        ({"s.py": SPIDER}, ["crawl", "{tmp}/s.py", "-o", "{tmp}/nowhere/out.jsonl"], "output directory does not exist"),
        ({"s.py": SPIDER}, ["crawl", "{tmp}/s.py", "-o", "{tmp}/out.xml"], "unsupported output format '.xml'"),
        ({"s.py": SPIDER}, ["crawl", "{tmp}/s.py:B"], "no spider 'B' in {tmp}/s.py (found: A)"),
        (
            {"two.py": SPIDER + SPIDER.replace("class A", "class B").replace('"a"', '"b"').split("\n", 2)[2]},
            ["crawl", "{tmp}/two.py"],
            "several spiders in {tmp}/two.py (A, B)",
        ),
        (
            {"u.py": SPIDER.replace("http://127.0.0.1:9/", "www.example.com")},
            ["crawl", "{tmp}/u.py"],
            "malformed URL 'www.example.com'",
        ),
        ({"n.py": SPIDER.replace('name = "a"', "pass")}, ["crawl", "{tmp}/n.py"], "spider A has no name"),
        ({"s.py": SPIDER}, ["crawl", "{tmp}/s.py", "--log-level", "LOUD"], "bad log level 'LOUD'"),
        (
            {"h.py": SPIDER.replace("http://127.0.0.1:9/", "htp://127.0.0.1:9/")},
            ["crawl", "{tmp}/h.py"],
            "start URL 'htp://127.0.0.1:9/' has scheme 'htp': eclaw crawls http:// and https:// URLs",
        ),
        (
            {"y.py": SPIDER.replace('start_urls = ["http://127.0.0.1:9/"]', START_REQUESTS_TYPO)},
            ["crawl", "{tmp}/y.py", "--log-level", "WARNING"],  # found once crawling: the error is one line
            "start URL 'htps://127.0.0.1:9/' has scheme 'htps'",
        ),
        (
            {"i.py": SPIDER + "    def __init__(self, **kw):\n        super().__init__(**kw)\n        1 / 0\n"},
            ["crawl", "{tmp}/i.py"],
            "spider A (i.py line 8): __init__ failed: ZeroDivisionError: division by zero",
        ),
        ({"s.py": SPIDER}, ["crawl", "{tmp}/s.py", "-a", "start_urls=[1,"], "spider argument start_urls: not a JSON"),
        (
            {"s.py": SPIDER},
            ["crawl", "{tmp}/s.py", "-o", "{tmp}/out/{{spider}}-%(batch)05d.jsonl", "-s", "output_batch_items=5"],
            "output directory does not exist: {tmp}/out (for {tmp}/out/a-00001.jsonl)",
        ),
        ({"s.py": SPIDER}, ["crawl", "{tmp}/s.py", "-o", "{tmp}/x.jsonl", "-o", "{tmp}/x.jsonl"], "given twice"),
        (
            {"t.jsonl": '{"t":0,"event":"SpiderOpened"}\n'},
            ["report", "{tmp}/t.jsonl", "-o", "{tmp}/no/r.html"],
            ("cannot write the report {tmp}/no/r.html: No such file or directory"),
        ),
    ],
)
async def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, files: dict[str, str], args: list[str], message: str
) -> None:
    for name, source in files.items():
        write(tmp_path, name, source)
    code, stdout, stderr = await eclaw(*(a.format(tmp=tmp_path) for a in args))
    assert code == 2, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("eclaw: error: ")
    assert message.format(tmp=tmp_path) in lines[0]


async def test_bad_environment_setting_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spider = write(tmp_path, "s.py", SPIDER)
    monkeypatch.setenv("ECLAW_TIMEOUT", "soon")
    code, _, err = await eclaw("crawl", spider)
    assert code == 2
    assert err.strip() == "eclaw: error: environment ECLAW_*: setting 'timeout' must be a number, got 'soon'"


SLOW_SPIDER = """
from eclaw import Spider
class Slow(Spider):
    name = "slow"
    def parse(self, response):
        if "/slow/" in response.url:
            yield {"url": response.url}
        yield from response.follow_all(css="a")
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_signal_finishes_in_flight_flushes_and_exits_0(tmp_path: Path, signum: signal.Signals) -> None:
    site = SlowSite(delay=0.4)
    async with serve(site.app()) as base:
        SLOW = SLOW_SPIDER.replace('name = "slow"', f'name = "slow"\n    start_urls = ["{base}/?count=200"]')
        process, out = await _start_slow(tmp_path, site, SLOW)
        try:
            process.send_signal(signum)
            stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
        finally:
            process.close()
    assert process.returncode == 0, stderr.decode()
    text = stdout.decode()
    assert re.search(rf"finish reason\s+shutdown \({signum.name}\)", text)
    assert "pending (not crawled)" in text
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(row["url"] for row in rows)
    assert site.hits < 200


async def test_second_sigint_exits_at_once(tmp_path: Path) -> None:
    site = SlowSite(delay=3)
    async with serve(site.app()) as base:
        SLOW = SLOW_SPIDER.replace('name = "slow"', f'name = "slow"\n    start_urls = ["{base}/?count=50"]')
        process, _ = await _start_slow(tmp_path, site, SLOW, hits=3)
        try:
            process.send_signal(signal.SIGINT)
            assert process.stderr is not None
            said = b""
            while b"again to quit now" not in said:  # the first one handled: the second is not merged into it
                line = await asyncio.wait_for(process.stderr.readline(), 10)
                assert line, said.decode()
                said += line
            process.send_signal(signal.SIGINT)
            _, stderr = await asyncio.wait_for(process.communicate(), 10)
        finally:
            process.close()
    assert process.returncode == 130, (said + stderr).decode()


async def _start_slow(tmp_path: Path, site: SlowSite, source: str, hits: int = 6) -> tuple[Child, Path]:
    """``eclaw crawl`` of the slow site as a process of its own (forked: it gets the signals), once the
    site has seen ``hits`` requests."""
    spider = write(tmp_path, "slow.py", source)
    out = tmp_path / "slow.jsonl"
    process = await spawn(
        "crawl",
        spider,
        "-o",
        str(out),
        "-s",
        "concurrency=4",
        "-s",
        "concurrency_per_domain=4",
        "-s",
        "shutdown_timeout=5",
        cwd=tmp_path,
        stdout=PIPE,
        stderr=PIPE,
    )
    for _ in range(400):
        if site.hits >= hits:
            break
        await asyncio.sleep(0.05)
    assert site.hits >= hits
    return process, out


async def test_demo_command_writes_items(tmp_path: Path) -> None:
    out = tmp_path / "demo.jsonl"
    code, stdout, stderr = await eclaw("demo", "-o", str(out))
    assert code == 0, stderr
    assert len(out.read_text().splitlines()) == 500
    assert "500 items written to" in stdout


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_demo_serve_serves_until_signalled(signum: int, tmp_path: Path) -> None:
    process = await spawn("demo", "--serve", cwd=tmp_path, stdout=PIPE, stderr=PIPE)
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        url = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert url, line
        async with aiohttp.ClientSession() as session, session.get(url.group(1) + "product/7") as response:
            assert response.status == 200
            assert "SKU-00007" in await response.text()
        process.send_signal(signum)
        await asyncio.wait_for(process.communicate(), 10)
    finally:
        process.close()
    assert process.returncode == 0


async def test_cli_crawl_tunes_gc_while_it_runs_and_restores_it(demo_url: str) -> None:
    import gc

    from eclaw import Engine, Response, Settings, Spider
    from eclaw.cli.crawl import crawl_with_signals

    seen: list[tuple[int, int, int]] = []

    class One(Spider):
        name = "one"
        start_urls = [demo_url]

        def parse(self, response: Response) -> None:
            seen.append(gc.get_threshold())

    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    await crawl_with_signals(Engine(Settings(store="")), One, {}, quiet=True)
    assert seen and seen[0][0] >= 20000 and seen[0][1:] == before[1:]
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


def test_the_command_line_starts_without_what_only_some_crawls_use() -> None:
    """Every worker and command starts by importing the CLI: the browser fetcher, aiohttp-socks and
    the demo's web server are imported when first used, not there (about 0.05 s of CPU each start)."""
    names = ["eclaw.fetchers.browser", "aiohttp_socks", "aiohttp.web", "eclaw.demo.site"]
    code = f"import sys, eclaw.cli.main; print([name for name in {names!r} if name in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_command_ends_without_the_collectors_last_pass() -> None:
    """``eclaw`` and ``python -m eclaw`` run ``command``: the command's exit code, and every object
    frozen out of the collector's pass at the interpreter's shutdown (40 ms an exit, see command)."""
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="eclaw")
    assert script.value == "eclaw.cli:command"
    code = "import gc, sys; from eclaw.cli import command; sys.argv = ['eclaw', 'list', sys.argv[1]]; "
    code += "status = command(); print(status, gc.get_freeze_count() > 1000)"
    out = subprocess.run([sys.executable, "-c", code, SHOP], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "0 True"
    assert (ROOT / "eclaw" / "__main__.py").read_text().count("command()") == 1
