"""The ``eclaw crawl`` examples of docs/outputs.md run as written (against the local demo shop)."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
from pathlib import Path

from eclaw.testing import demo_site
from tests.forkserver import PIPE, spawn
from tests.outputs.readback import read_rows

ROOT = Path(__file__).parents[2]
ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}


def doc_commands(page: str) -> list[str]:
    """The ``eclaw crawl spiders/shop.py`` lines of the page's bash blocks, comments cut."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    lines = [line for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()]
    return [re.sub(r"\s+#\s.*", "", line) for line in lines if line.startswith("eclaw crawl spiders/shop.py")]


async def run_command(command: str, base: str, cwd: Path) -> str:
    """The command (``eclaw`` forked from the fork server) as a shell runs it: its quoting, its ``> FILE``."""
    words = shlex.split(command)
    assert words[:3] == ["eclaw", "crawl", "spiders/shop.py"], command
    args = ["crawl", str(ROOT / "spiders" / "shop.py"), *words[3:], "-a", f"base_url={base}"]
    stdout = PIPE
    if ">" in args:  # the shell's redirection of stdout to a file
        at = args.index(">")
        stdout = os.open(cwd / args[at + 1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        del args[at : at + 2]
    try:
        process = await spawn(*args, "-s", "max_pages=80", "-q", cwd=cwd, env=ENV, stdout=stdout, stderr=PIPE)
    finally:
        if stdout != PIPE:
            os.close(stdout)  # the child has its own copy
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    finally:
        process.close()
    assert process.returncode == 0, f"{command}: {stderr.decode()[-1500:]}"
    return stdout.decode()


async def test_the_commands_of_the_outputs_page_run(tmp_path: Path) -> None:
    commands = doc_commands("outputs.md")
    assert len(commands) >= 8
    for k in range(len(commands)):
        (tmp_path / str(k) / "out").mkdir(parents=True)  # the rotated example's folder
    async with demo_site() as base:
        printed = await asyncio.gather(*(run_command(c, base, tmp_path / str(k)) for k, c in enumerate(commands)))
    for command, stdout in zip(commands, printed, strict=True):
        if "stdout:csv" in command:
            assert stdout.splitlines()[0].count(",") >= 2  # a CSV header: only items on stdout
    check_files(tmp_path)


def check_files(tmp: Path) -> None:
    assert read_rows(next(tmp.glob("*/items.csv.gz")), "csv", "gz")
    assert read_rows(next(tmp.glob("*/items.jsonl.zst")), "jsonl", "zst")
    assert read_rows(next(tmp.glob("*/export.txt")), "json")
    assert list(tmp.glob("*/out/shop-*-00001.jsonl.gz"))
