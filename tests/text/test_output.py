"""The markdown outputs through the real CLI: ``-o pages:markdown`` (a ``.md`` file per page) and
``-o pages.md.jsonl`` (a row per page, ``?chunks=`` adding chunks) on the Python docs served
locally; HTML pages only, secrets redacted, and each page exactly once after two SIGKILLs and a
``--state`` resume."""

from __future__ import annotations

import asyncio
import collections
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
import pytest_asyncio

from eclaw.exceptions import ConfigError
from eclaw.outputs.build import output_for
from eclaw.testing import serve
from eclaw.text.writers import page_file_name
from tests.inprocess import eclaw_inprocess
from tests.text.site import TOKEN, docs_folder, make_app

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).parents[2]
SPIDER = str(Path(__file__).with_name("site.py")) + ":DocsSpider"


async def start(*args: str, cwd: Path, log: IO[bytes] | None = None) -> asyncio.subprocess.Process:
    """The crawl in a process of its own; its output piped, or into ``log`` when nobody will read the pipes."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}  # a native abort: tracebacks
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eclaw", "crawl", SPIDER, "-s", "store=", "--log-level", "ERROR", *args,
        cwd=cwd, env=env, stdout=log or subprocess.PIPE, stderr=log or subprocess.PIPE,
    )  # fmt: skip


async def crawl(*args: str, cwd: Path) -> str:
    """The crawl as ``start`` runs it, in this process (the CLI's main; ``cwd`` made the working directory):
    its stdout. Only what is about the process (the SIGKILLs) needs a child."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        code, stdout, stderr = await eclaw_inprocess(
            "crawl", SPIDER, "-s", "store=", "--log-level", "ERROR", *args, wait=180
        )
    assert code == 0, stderr[-3000:]
    return stdout


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def front_matter(path: Path) -> dict[str, Any]:
    head, _, _ = path.read_text(encoding="utf-8").removeprefix("---\n").partition("\n---\n")
    return {key: json.loads(value) for key, _, value in (line.partition(": ") for line in head.splitlines())}


@dataclass
class Crawled:
    base: str
    folder: Path
    output: str


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def site() -> AsyncIterator[str]:
    async with serve(make_app(docs_folder())) as base:
        yield base


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def crawled(site: str, tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    """One crawl of the docs' tutorial, FAQ and "using" sections (and our pages) into four outputs."""
    folder = tmp_path_factory.mktemp("pages")
    output = await crawl(
        "-a", f"base_url={site}", "-a", f"access_token={TOKEN}", "-a", "sections=tutorial,faq,using",
        "-o", "pages.md.jsonl", "-o", "pages:markdown",
        "-o", f"file://{folder}/chunked.md.jsonl?chunks=1500&overlap=100",
        "-o", "batch-%(batch)03d.md.jsonl", "-s", "output_batch_items=10", cwd=folder,
    )  # fmt: skip
    return Crawled(site, folder, output)


async def test_one_row_per_html_page(crawled: Crawled) -> None:
    found = rows(crawled.folder / "pages.md.jsonl")
    urls = [row["url"].removeprefix(crawled.base) for row in found]
    assert len(urls) == len(set(urls)) > 30
    assert {"/latin1.html", "/empty.html", "/docs/tutorial/controlflow.html", "/docs/faq/general.html"} <= set(urls)
    assert not {"/file.pdf", "/data.json"} & set(urls)  # binary and JSON bodies are no pages
    by_path = {row["url"].removeprefix(crawled.base): row for row in found}
    page = by_path["/docs/tutorial/controlflow.html"]
    assert set(page) == {"url", "title", "language", "fetched", "markdown"}
    assert page["title"] == "4. More Control Flow Tools" and page["language"] == "en"
    assert page["markdown"].startswith("# 4. More Control Flow Tools\n\n") and "Previous topic" not in page["markdown"]
    assert page["fetched"].endswith("Z")
    assert (by_path["/latin1.html"]["title"], by_path["/latin1.html"]["language"]) == ("Café crème", "fr")
    assert by_path["/empty.html"]["markdown"] == ""


async def test_one_file_per_page_with_front_matter(crawled: Crawled) -> None:
    files = sorted((crawled.folder / "pages").iterdir())
    jsonl = {row["url"]: row for row in rows(crawled.folder / "pages.md.jsonl")}
    assert [f.name for f in files] == sorted(page_file_name(url) for url in jsonl)
    for file in files:
        meta = front_matter(file)
        row = jsonl[meta["url"]]
        assert meta == {key: row[key] for key in ("url", "title", "language")} | {"fetched": meta["fetched"]}
        assert file.read_text(encoding="utf-8").endswith(row["markdown"] + "\n")
    assert (crawled.folder / "pages" / page_file_name(f"{crawled.base}/docs/tutorial/index.html")).exists()


async def test_chunks_in_rows(crawled: Crawled) -> None:
    for row in rows(crawled.folder / "chunked.md.jsonl"):
        chunks, markdown = row["chunks"], row["markdown"]
        assert [c["index"] for c in chunks] == list(range(len(chunks)))
        assert all(len(c["text"]) <= 1500 for c in chunks)
        assert bool(chunks) == bool(markdown) and (not chunks or chunks[0]["text"] in markdown)
        if markdown.startswith("# "):
            assert chunks[0]["headings"][0] == markdown.splitlines()[0][2:]


async def test_rotated_files(crawled: Crawled) -> None:
    batches = sorted(crawled.folder.glob("batch-*.md.jsonl"))
    found = [rows(batch) for batch in batches]
    assert len(batches) > 3 and all(len(batch) == 10 for batch in found[:-1]) and 0 < len(found[-1]) <= 10
    whole = {row["url"] for row in rows(crawled.folder / "pages.md.jsonl")}
    assert sorted(row["url"] for batch in found for row in batch) == sorted(whole)


async def test_secrets_are_redacted(crawled: Crawled) -> None:
    written = [crawled.folder / "pages.md.jsonl", crawled.folder / "chunked.md.jsonl"]
    written += list((crawled.folder / "pages").iterdir())
    for path in written:
        assert TOKEN not in path.read_text(encoding="utf-8"), path
    account = next(row for row in rows(written[0]) if "/account.html" in row["url"])
    assert account["url"].endswith("/account.html?access_token=***")
    assert "Your API token is ***" in account["markdown"]


async def wait_for(condition: Callable[[], bool], process: asyncio.subprocess.Process, log: Path) -> None:
    """Until ``condition`` holds while ``process`` runs (two minutes at most); its log in the failure if it ends."""
    deadline = time.monotonic() + 120
    while not condition():
        if process.returncode is not None or time.monotonic() > deadline:
            ended = "timed out" if process.returncode is None else f"the crawl ended ({process.returncode}) first"
            raise AssertionError(f"{ended}: {tail(log)}")
        await asyncio.sleep(0.02)


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


def size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


async def test_sigkill_twice_then_resume_writes_each_page_once(site: str, crawled: Crawled, tmp_path: Path) -> None:
    options = ["-a", f"base_url={site}", "-a", "sections=tutorial,faq", "--state", str(tmp_path / "state"),
               "-o", "pages.md.jsonl", "-o", "pages:markdown", "-s", "checkpoint_interval=0.1"]  # fmt: skip
    jsonl = tmp_path / "pages.md.jsonl"
    for threshold in (60_000, 250_000):
        log = tmp_path / f"killed-at-{threshold}.log"
        with log.open("wb") as out:  # a pipe nobody reads would stall the crawl once it is full
            process = await start(*options, cwd=tmp_path, log=out)
            await wait_for(lambda threshold=threshold: size(jsonl) >= threshold, process, log)  # type: ignore[misc]
        process.kill()  # SIGKILL: no clean-up of any kind
        assert await process.wait() == -signal.SIGKILL  # killed mid-crawl, not finished
    await crawl(*options, cwd=tmp_path)
    written = collections.Counter(row["url"] for row in rows(jsonl))  # every line whole JSON
    assert max(written.values()) == 1, [url for url, n in written.items() if n > 1]
    expected = {
        row["url"] for row in rows(crawled.folder / "pages.md.jsonl")
        if row["url"].removeprefix(crawled.base).startswith(("/docs/tutorial/", "/docs/faq/", "/latin1", "/empty"))
    }  # fmt: skip
    assert set(written) == expected
    folder = tmp_path / "pages"
    assert sorted(f.name for f in folder.iterdir()) == sorted(page_file_name(url) for url in expected)  # no .tmp


async def test_the_command_of_the_docs(site: str, tmp_path: Path) -> None:
    """docs/text.md's command as written (its spider: ours, on the tutorial)."""
    text = (ROOT / "docs" / "text.md").read_text(encoding="utf-8")
    command = re.findall(r"```console\n\$ (.*?)\n", text)[0].split()
    assert command[:3] == ["eclaw", "crawl", "spider.py"]
    await crawl("-a", f"base_url={site}", "-a", "sections=tutorial", *command[3:], cwd=tmp_path)
    found = rows(tmp_path / "pages.md.jsonl")
    assert len(found) == len(list((tmp_path / "pages").iterdir())) > 17  # the tutorial and our pages
    assert (tmp_path / "crawl-state").is_dir()


async def test_bad_options_fail_before_the_crawl_in_one_line(site: str, tmp_path: Path) -> None:
    spec = f"file://{tmp_path}/p.md.jsonl?chunks=lots"
    code, _, stderr = await eclaw_inprocess("crawl", SPIDER, "-s", "store=", "-a", f"base_url={site}", "-o", spec)
    assert code == 2
    assert stderr.strip().splitlines()[-1].endswith("?chunks= takes a whole number, not 'lots'")
    assert not (tmp_path / "p.md.jsonl").exists()


async def test_without_the_extra_outputs_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trafilatura", None)  # import trafilatura raises ImportError
    with pytest.raises(ConfigError, match=r"^markdown outputs: text extraction needs trafilatura: pip install"):
        output_for("pages:markdown", "spider")
