"""Replay with pywb: the archives eclaw wrote (and their CDXJ indexes, as pywb reads them) give the
original pages back, byte for byte; a recrawl's revisits give the original's body. One pywb server for
the module: the one docs/archives.md's commands start, which finds a collection made after its start."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from eclaw.testing import serve
from tests.archive.helpers import ROOT
from tests.archive.pywb import pywb_bin, wayback
from tests.archive.running import crawl_here
from tests.archive.site import GZ_DECODED, SENT, make_app
from tests.inprocess import eclaw_inprocess

pytestmark = pytest.mark.asyncio(loop_scope="module")


def captures(index: Path) -> dict[str, tuple[str, str]]:
    """URL -> (timestamp, kind of record) of each line of a CDXJ index."""
    found = {}
    for line in index.read_text().splitlines():
        _, timestamp, fields = line.split(" ", 2)
        data = json.loads(fields)
        found[data["url"]] = (timestamp, data["mime"])
    return found


async def test_pywb_replays_the_archived_pages(tmp_path: Path, docs_pywb: DocsPywb) -> None:
    async with serve(make_app()) as base:
        await crawl_here("-a", f"base_url={base}", "-o", "first.warc.gz", cwd=tmp_path)
        await crawl_here("-a", f"base_url={base}", "-o", "second.warc.gz", cwd=tmp_path)
    add_collection(docs_pywb.root, "crawls", [tmp_path / "first.warc.gz", tmp_path / "second.warc.gz"])
    first, second = captures(tmp_path / "first.cdxj"), captures(tmp_path / "second.cdxj")
    assert second[base + "/page/0"][1] == "warc/revisit"

    pywb = docs_pywb.url
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        for archive in (first, second):
            for path, (kind, body) in SENT.items():
                timestamp, _ = archive[base + path]
                # id_: the original bytes, not rewritten for the browser
                async with session.get(f"{pywb}/crawls/{timestamp}id_/{base}{path}") as response:
                    assert response.status == 200, (path, await response.text())
                    got = await response.read()  # pywb may decode the gzip page itself
                    if response.headers.get("Content-Encoding") == "gzip":
                        got = gzip.decompress(got)
                    assert got == (GZ_DECODED if path == "/gz" else body), path
                    assert response.headers["Content-Type"] == kind
        async with session.get(f"{pywb}/crawls/{first[base + '/missing'][0]}id_/{base}/missing") as response:
            assert response.status == 404  # replayed as archived
        for archive in (first, second):
            await _follows_the_redirect(session, f"{pywb}/crawls/{archive[base + '/moved'][0]}", base)


async def _follows_the_redirect(session: aiohttp.ClientSession, capture: str, base: str) -> None:
    """The archived 302 replays as a 302: as archived with ``id_``, its Location rewritten into the
    archive otherwise; a client that follows it gets the page it led to, from the archive."""
    async with session.get(f"{capture}id_/{base}/moved", allow_redirects=False) as response:
        assert response.status == 302, await response.text()
        assert response.headers["Location"] == "/landing"  # the header as the site sent it
    async with session.get(f"{capture}mp_/{base}/moved", allow_redirects=False) as response:
        assert response.status == 302, await response.text()
        location = response.headers["Location"]
    assert location == f"/crawls/{capture.rsplit('/', 1)[1]}mp_/{base}/landing"  # into the archive
    async with session.get(f"{capture}mp_/{base}/moved") as response:
        assert response.status == 200 and len(response.history) == 1
        assert b"<h1>Landed</h1>" in await response.read()


def doc_commands() -> list[str]:
    """The commands of docs/archives.md, in order."""
    text = (ROOT / "docs" / "archives.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```console\n(.*?)```", text, re.S)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


async def shell(command: str, cwd: Path, env: dict[str, str]) -> str:
    process = await asyncio.create_subprocess_shell(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, (command, stderr.decode()[-2000:])
    return stdout.decode()


@dataclass
class DocsPywb:
    """What docs/archives.md's commands made: their folder, the site's URL, the crawl's listing, the
    URL of the pywb server its last command started."""

    root: Path
    base: str
    listing: str
    url: str


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def docs_pywb(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DocsPywb]:
    """docs/archives.md's commands as written, in a folder of the module: the crawl (the ``eclaw``
    command run in this process), the listing it shows, pywb's collection and server (pywb from the
    tests' own environment, on a free port instead of 8080)."""
    root = tmp_path_factory.mktemp("docs-archive")
    commands = doc_commands()
    assert commands[0] == "eclaw crawl myspider.py -o crawl.warc.gz"
    assert commands[-1] == ".venv-pywb/bin/wayback -p 8080"
    shutil.copy(Path(__file__).with_name("site.py"), root / "myspider.py")
    pywb = str(pywb_bin().parent)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    async with serve(make_app()) as base:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("ARCHIVE_SITE", base)
            with contextlib.chdir(root):
                code, _, err = await eclaw_inprocess(*shlex.split(commands[0])[1:])
        assert code == 0, err[-2000:]
    listing = await shell(commands[1], root, env)
    for command in commands[2:-1]:
        if not command.startswith("python -m venv"):  # the tests' pywb environment is made already
            await shell(command.replace(".venv-pywb", pywb), root, env)
    server = [*commands[-1].replace(".venv-pywb", pywb).replace("8080", "{port}").split(), "-b", "127.0.0.1"]
    async with wayback(root, server) as url:
        yield DocsPywb(root, base, listing, url)


def add_collection(root: Path, name: str, archives: list[Path]) -> None:
    """A pywb collection ``name`` under ``root`` holding ``archives`` and their own CDXJ indexes, laid
    out as ``wb-manager init`` does (which the docs' commands run) for the server running there."""
    folder = root / "collections" / name
    (folder / "archive").mkdir(parents=True)
    (folder / "indexes").mkdir()
    for archive in archives:
        shutil.copy(archive, folder / "archive" / archive.name)
        cdxj = archive.with_name(archive.name.removesuffix(".gz").removesuffix(".warc") + ".cdxj")
        shutil.copy(cdxj, folder / "indexes" / cdxj.name)


async def test_the_commands_of_the_docs_archive_and_replay_a_site(docs_pywb: DocsPywb) -> None:
    text = (ROOT / "docs" / "archives.md").read_text(encoding="utf-8")
    assert " ".join(docs_pywb.listing.split()) in " ".join(text.split())  # the listing the page shows
    base, url = docs_pywb.base, docs_pywb.url
    timestamp = captures(docs_pywb.root / "crawl.cdxj")[base + "/page/1"][0]
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{url}/my-crawls/{timestamp}id_/{base}/page/1") as response:
            assert response.status == 200
            assert await response.read() == SENT["/page/1"][1]
        async with session.get(f"{url}/my-crawls/{timestamp}mp_/{base}/page/1") as response:
            assert response.status == 200 and "<h1>Page 1</h1>" in await response.text()  # rewritten for a browser
        async with session.get(f"{url}/my-crawls/{timestamp}/{base}/page/1") as response:
            assert response.status == 200 and "replay_iframe" in await response.text()  # in pywb's frame
