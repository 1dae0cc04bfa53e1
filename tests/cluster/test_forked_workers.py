"""``eclaw worker --processes N``: N cluster workers forked from one command, on a real redis-server.

The site is unlike the demo shop: a glossary of 240 entries in windows-1250 (Czech words), each
entry's links relative and with a query string, answers from 0.2 to 40 KB, every seventh link a
dead one (404). Each item says which process parsed it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

from aiohttp import web

from eclaw import Settings
from eclaw.cluster.seed import seed
from eclaw.spider import load_spider, make_spider
from eclaw.testing import serve
from tests.children import children_of
from tests.cluster.servers import CountingSite, RedisServer, redis_server
from tests.cluster.test_cluster import eclaw, ended, stored_items, wait_for_items
from tests.conftest import until

ENTRIES = 240
WORDS = ["žluťoučký", "kůň", "úpěl", "ďábelské", "ódy", "šťáva", "řeřicha", "čočka"]

SPIDER = """
import os
from eclaw import Spider

class Glossary(Spider):
    name = "glossary"
    item_key = ("entry",)  # an entry redone by another worker is the same item, whoever parsed it

    def __init__(self, base_url="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [base_url + "/slovnik/0?lang=cs&v=2"]

    def parse(self, response):
        yield {"entry": int(response.css("dfn::attr(data-n)").get()), "word": response.css("dfn::text").get(),
               "pid": os.getpid()}
        yield from response.follow_all(css="nav a")
"""


class Glossary(CountingSite):
    """The glossary, answering each entry after ``delay`` seconds; the most entries asked at once."""

    def __init__(self, delay: float = 0.02) -> None:
        super().__init__(ENTRIES, delay)

    @staticmethod
    def word(n: int) -> str:
        return f"{WORDS[n % len(WORDS)]} {n}"

    def app(self) -> web.Application:
        async def entry(request: web.Request) -> web.Response:
            n = int(request.match_info["n"])
            if n >= ENTRIES:
                raise web.HTTPNotFound()
            await self.delayed()
            targets = [m for m in (2 * n + 1, 2 * n + 2) if m < ENTRIES] + [(n * 7) % ENTRIES]
            targets += [ENTRIES + n] if n % 7 == 0 else []  # a dead link
            links = "".join(f'<a href="{m}?lang=cs&amp;v=2">{self.word(m)}</a>' for m in targets)
            filler = f"<p>{self.word(n)} — " + "ř" * (n * 170 % 40000) + "</p>"
            html = (
                '<html><head><meta charset="windows-1250"></head><body>'
                f'<dfn data-n="{n}">{self.word(n)}</dfn>{filler}<nav>{links}</nav></body></html>'
            )
            return web.Response(body=html.encode("cp1250"), content_type="text/html", charset="windows-1250")

        app = web.Application()
        app.router.add_get("/slovnik/{n}", entry)
        return app


async def seeded(tmp: Path, server: RedisServer, base: str) -> list[str]:
    """The glossary's crawl seeded here (as ``eclaw seed`` does, without starting a process for it):
    the command line of its workers."""
    (tmp / "glossary.py").write_text(SPIDER)
    spider = [str(tmp / "glossary.py"), "-a", f"base_url={base}", "--redis", server.url]
    settings = Settings().replace(frontier_url=server.url, store="")
    await seed(make_spider(load_spider(spider[0]), {"base_url": base}), settings)
    return spider


async def test_three_forked_workers_share_the_crawl_and_its_limits(tmp_path: Path) -> None:
    site = Glossary()
    async with serve(site.app()) as base:
        with redis_server(tmp_path) as server:
            spider = await seeded(tmp_path, server, base)
            limits = ["-s", "concurrency=4", "-s", "concurrency_per_domain=3"]
            out = await ended(await eclaw(tmp_path, "worker", *spider, *limits, "--processes", "3", "-o", "all.jsonl"))
            items = await stored_items(server, "glossary")
    assert sorted(item["entry"] for item in items) == list(range(ENTRIES))  # type: ignore[type-var]
    assert all(item["word"] == Glossary.word(item["entry"]) for item in items)  # type: ignore[arg-type]
    assert len({item["pid"] for item in items}) == 3  # three processes parsed, none of them this command
    assert os.getpid() not in {item["pid"] for item in items}
    assert site.hits == ENTRIES and site.peak <= 3  # each entry once; the host's limit held across the three
    assert "3 workers on this machine" in out
    merged = out.split("merged stats of every worker")[1]
    assert int(merged.split("parsed")[1].split()[0]) == ENTRIES
    assert int(merged.split("http 404")[1].split()[0]) == len(range(0, ENTRIES, 7))
    assert len((tmp_path / "all.jsonl").read_text(encoding="utf-8").splitlines()) == ENTRIES
    failures = (tmp_path / "eclaw-data" / "glossary" / "failures.jsonl").read_text().splitlines()
    dead = {json.loads(line)["url"].split("/")[-1].split("?")[0] for line in failures}
    assert len(failures) == len(dead) == len(range(0, ENTRIES, 7))  # each worker's, gathered, each once


async def test_ctrl_c_stops_every_forked_worker_and_a_second_run_finishes_the_crawl(tmp_path: Path) -> None:
    site = Glossary(delay=0.1)
    async with serve(site.app()) as base:
        with redis_server(tmp_path) as server:
            spider = await seeded(tmp_path, server, base)
            limits = ["-s", "concurrency=2"]
            first = await eclaw(tmp_path, "worker", *spider, *limits, "--processes", "2")
            await wait_for_items(server, "glossary", 20)
            first.send_signal(signal.SIGINT)  # as a terminal's Ctrl-C: to the command, which tells its workers
            out, _ = await asyncio.wait_for(first.communicate(), 60)
            assert first.returncode == 1
            assert "2 of 2 workers stopped" in out.decode()
            stopped_at = len(await stored_items(server, "glossary"))
            assert 20 <= stopped_at < ENTRIES
            await ended(await eclaw(tmp_path, "worker", *spider, "--processes", "2"))
            items = await stored_items(server, "glossary")
    assert sorted(item["entry"] for item in items) == list(range(ENTRIES))  # type: ignore[type-var]
    assert site.hits <= ENTRIES + 4  # at most the requests in flight at the stop were fetched again


def alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


async def test_the_command_killed_takes_its_workers_and_another_finishes_the_crawl(tmp_path: Path) -> None:
    site = Glossary(delay=0.05)
    async with serve(site.app()) as base:
        with redis_server(tmp_path) as server:
            spider = await seeded(tmp_path, server, base)
            command = await eclaw(tmp_path, "worker", *spider, "-s", "lease_timeout=1", "--processes", "2")
            await wait_for_items(server, "glossary", 20)
            workers = children_of(command.pid)
            assert len(workers) == 2
            command.send_signal(signal.SIGKILL)  # no handler, no goodbye: the kernel ends its workers too
            await command.wait()
            await until(lambda: not alive(workers), 30)
            await ended(await eclaw(tmp_path, "worker", *spider, "-s", "lease_timeout=1"))  # takes their leases
            items = await stored_items(server, "glossary")
    assert sorted(item["entry"] for item in items) == list(range(ENTRIES))  # type: ignore[type-var]


async def test_a_second_ctrl_c_stops_the_workers_at_once_in_one_line(tmp_path: Path) -> None:
    site = Glossary(delay=0.3)
    async with serve(site.app()) as base:
        with redis_server(tmp_path) as server:
            spider = await seeded(tmp_path, server, base)
            command = await eclaw(tmp_path, "worker", *spider, "-s", "shutdown_timeout=30", "--processes", "2")
            await until(lambda: site.hits >= 4, 60)
            command.send_signal(signal.SIGINT)
            assert command.stderr is not None
            said = b""  # each worker says it heard the first Ctrl-C: the second is a second one to both
            async with asyncio.timeout(60):
                while said.count(b"finishing in-flight requests") < 2:
                    said += await command.stderr.readline()
            command.send_signal(signal.SIGINT)  # the downloads in flight are not waited for
            _, err = await asyncio.wait_for(command.communicate(), 20)
    text = (said + err).decode()
    assert command.returncode == 130
    assert text.count("eclaw: interrupted") == 1 and "Traceback" not in text


async def bad_worker(tmp: Path, *args: str) -> tuple[int | None, str]:
    (tmp / "glossary.py").write_text(SPIDER)
    worker = await eclaw(tmp, "worker", str(tmp / "glossary.py"), *args)
    _, err = await worker.communicate()
    return worker.returncode, err.decode().strip()


async def test_bad_input_to_forked_workers_is_one_line_and_exit_2(tmp_path: Path) -> None:
    nowhere = ["--redis", "redis://127.0.0.1:1/0"]
    code, err = await bad_worker(tmp_path, *nowhere, "--processes", "0")
    assert (code, err) == (2, "eclaw: error: --processes expects a number of processes or 'auto', got '0'")
    code, err = await bad_worker(tmp_path, *nowhere, "--processes", "3")  # said once, not by each worker
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("eclaw: error: cannot reach Redis at redis://127.0.0.1:1/0")
    code, err = await bad_worker(tmp_path, *nowhere, "--processes", "2", "-s", "trace=t.jsonl")
    assert code == 2 and err == (
        "eclaw: error: eclaw worker --processes: not with trace or metrics_port (one worker a command for those)"
    )
