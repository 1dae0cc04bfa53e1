"""A third-party format joins by entry point, with no edit of eclaw: the example package of
docs/plugins.md, "installed" as a ``*.dist-info`` folder on ``PYTHONPATH`` (what importlib.metadata
reads), then ``eclaw crawl -o items.tsv`` (and ``.tsv.gz``, ``-:tsv``) use it."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import sys
from pathlib import Path

import pytest

from eclaw.exceptions import ConfigError
from eclaw.outputs.registry import FORMATS
from eclaw.outputs.spec import parse_spec
from eclaw.testing import serve
from tests.forkserver import PIPE, spawn
from tests.state.site import expected, make_app

ROOT = Path(__file__).parents[2]
SPIDER = str(ROOT / "tests" / "state" / "site.py") + ":StateSpider"
PAGE = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")


def example_package(site: Path) -> Path:
    """The docs' example module and its entry point, as pip would leave them in site-packages."""
    (code,) = [block for block in re.findall(r"```python\n(.*?)```", PAGE, re.S) if "class TsvFormat" in block]
    (toml,) = [block for block in re.findall(r"```toml\n(.*?)```", PAGE, re.S) if "eclaw_tsv:TSV" in block]
    site.mkdir()
    (site / "eclaw_tsv.py").write_text(code, encoding="utf-8")
    info = site / "eclaw_tsv-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: eclaw-tsv\nVersion: 0.1\n", encoding="utf-8")
    points = toml.partition('[project.entry-points."eclaw.formats"]')[2].strip().replace('"', "")  # INI, not TOML
    (info / "entry_points.txt").write_text(f"[eclaw.formats]\n{points}\n", encoding="utf-8")
    return site


async def crawl(tmp: Path, base: str, site: Path, *outputs: str) -> tuple[int, bytes, bytes]:
    """One ``eclaw crawl`` in a process of its own (it finds the format at its start, as a user's would),
    forked from the fork server (tests/forkserver.py), writing to each of ``outputs``: its exit code,
    stdout and stderr."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{site}"}
    process = await spawn(
        "crawl", SPIDER, "-a", f"base_url={base}", "-s", "store=",
        *(arg for output in outputs for arg in ("-o", output)), "-s", f"failures={tmp / 'failures.jsonl'}", "-q",
        cwd=tmp, env=env, stdout=PIPE, stderr=PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return await process.wait(), out, err


def pages(tsv: bytes) -> list[int]:
    lines = tsv.decode().splitlines()
    column = lines[0].split("\t").index("page")
    return [int(line.split("\t")[column]) for line in lines[1:]]


async def test_a_format_from_an_installed_package(tmp_path: Path) -> None:
    site = example_package(tmp_path / "site")
    async with serve(make_app(delay=0)) as base:  # one crawl, its items in the three forms
        code, out, err = await crawl(tmp_path, base, site, "items.tsv", "items.tsv.gz", "stdout:tsv")
    assert code == 0, err.decode()[-2000:]
    parsed = sorted(expected()[0])
    assert sorted(pages((tmp_path / "items.tsv").read_bytes())) == parsed
    assert sorted(pages(gzip.decompress((tmp_path / "items.tsv.gz").read_bytes()))) == parsed
    assert sorted(pages(out)) == parsed


def test_in_process_the_registry_sees_it_after_a_refresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"unsupported output format '\.tsv'"):
        parse_spec("items.tsv")
    monkeypatch.syspath_prepend(str(example_package(tmp_path / "site")))
    FORMATS.refresh()
    try:
        spec = parse_spec("items.tab.zst")
        assert (spec.format, spec.compression) == ("tsv", "zst")
    finally:
        monkeypatch.undo()
        FORMATS.refresh()
        sys.modules.pop("eclaw_tsv", None)


def test_built_ins_are_entry_points_too() -> None:
    from eclaw.fetchers.router import FETCHERS
    from eclaw.outputs.registry import COMPRESSIONS, DESTINATIONS

    assert {"jsonl", "json", "csv", "sqlite", "parquet"} <= set(FORMATS.names())
    assert {"gz", "zst", "bz2", "xz"} <= set(COMPRESSIONS.names())
    assert {"file", "stdout"} <= set(DESTINATIONS.names())
    assert {"plain", "impersonate", "browser"} <= set(FETCHERS)


def test_a_discovery_source_by_name() -> None:
    from eclaw.discovery.feeds import Feeds
    from eclaw.discovery.source import named_source

    source = named_source("feeds:http://127.0.0.1:9/rss.xml")
    assert isinstance(source, Feeds) and source.urls == ["http://127.0.0.1:9/rss.xml"]
    assert named_source("http://127.0.0.1:9/rss.xml") is None  # a URL names no source


FETCHER = '''
from eclaw import Response


class Canned:
    """A fetcher that makes pages up: every URL gets a page naming itself."""

    async def open(self, spider, settings):
        self.spider = spider

    async def fetch(self, request):
        body = f"<html><title>{request.url}</title></html>".encode()
        return Response(request.url, body=body, headers={"content-type": "text/html"}, request=request)

    async def close(self):
        return None
'''

CANNED_SPIDER = '''
from eclaw import Spider


class Canned(Spider):
    name = "canned"
    fetcher = "canned"  # the plug-in's name: no such fetcher in eclaw
    start_urls = ["http://canned.invalid/a", "http://canned.invalid/b"]

    def parse(self, response):
        yield {"title": response.css("title::text").get()}
'''


async def test_a_fetcher_from_an_installed_package(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "canned_fetcher-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "canned_fetcher.py").write_text(FETCHER, encoding="utf-8")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: canned-fetcher\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[eclaw.fetchers]\ncanned = canned_fetcher:Canned\n", encoding="utf-8")
    (tmp_path / "spider.py").write_text(CANNED_SPIDER, encoding="utf-8")
    process = await spawn(  # a process of its own, forked from the fork server
        "crawl", "spider.py", "-o", "-", "-s", "store=", "-q",
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{site}"}, stdout=PIPE, stderr=PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()[-2000:]
    titles = sorted(json.loads(line)["title"] for line in out.decode().splitlines())
    assert titles == ["http://canned.invalid/a", "http://canned.invalid/b"]
