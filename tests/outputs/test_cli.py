"""``eclaw crawl -o``: compressed outputs survive SIGKILL then ``--state`` resume with every item
exactly once; ``-o -`` puts only items on stdout; a bad spec is one line and exit 2."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from eclaw.testing import serve
from tests.outputs.forked import Child, eclaw_forked, start_forked
from tests.outputs.readback import read_rows
from tests.outputs.state_part import SPIDER, expected, make_app

ROOT = Path(__file__).parents[2]
ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}


async def start(base: str, tmp: Path, *outputs: str) -> Child:
    return await start_forked(
        "crawl", SPIDER, "-a", f"base_url={base}", "--state", str(tmp / "state"),
        *(arg for output in outputs for arg in ("-o", output)), "-s", "checkpoint_interval=0.2",
        "-s", f"failures={tmp / 'failures.jsonl'}", "-s", f"dead_letter={tmp / 'dead.jsonl'}", "-s", "store=",
        "--log-level", "WARNING", cwd=tmp, env=ENV,
    )  # fmt: skip


def written(tmp: Path) -> int:
    path = tmp / "gauge.jsonl"  # a plain file: how far the crawl got, readable at any moment
    return path.read_bytes().count(b"\n") if path.exists() else 0


async def kill_when(process: Child, count: int, tmp: Path) -> None:
    for _ in range(3000):  # a minute at most
        if written(tmp) >= count or process.returncode is not None:
            break
        await asyncio.sleep(0.02)
    process.kill()  # SIGKILL: no clean-up of any kind
    await process.wait()


async def test_sigkill_then_resume_gives_every_item_once_in_compressed_files(tmp_path: Path) -> None:
    outputs = [str(tmp_path / n) for n in ("gauge.jsonl", "items.jsonl.gz", "items.jsonl.zst", "items.csv.xz")]
    parsed = expected()[0]
    async with serve(make_app()) as base:
        for target in (len(parsed) // 4, len(parsed) // 2):
            process = await start(base, tmp_path, *outputs)
            await kill_when(process, target, tmp_path)
        process = await start(base, tmp_path, *outputs)
        _, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-2000:]
    for name, fmt, compression in [("items.jsonl.gz", "jsonl", "gz"), ("items.jsonl.zst", "jsonl", "zst"),
                                   ("items.csv.xz", "csv", "xz")]:  # fmt: skip
        pages = [int(row["page"]) for row in read_rows(tmp_path / name, fmt, compression)]
        assert len(pages) == len(set(pages)), f"{name}: an item was written twice"
        assert set(pages) == parsed, f"{name}: missing {sorted(parsed - set(pages))[:10]}"


async def test_stdout_holds_only_the_items(tmp_path: Path) -> None:
    async with serve(make_app(delay=0)) as base:
        code, stdout, stderr = await eclaw_forked(
            "crawl", SPIDER, "-a", f"base_url={base}", "-o", "-", "-s", "store=",
            "-s", f"failures={tmp_path / 'failures.jsonl'}", cwd=tmp_path, env=ENV,
        )  # fmt: skip
    assert code == 0, stderr[-2000:]
    pages = [json.loads(line)["page"] for line in stdout.splitlines()]  # every line an item
    assert sorted(pages) == sorted(expected()[0])
    assert "wrote" in stderr and "items" in stderr  # the summary went to stderr
    said = [line for line in stderr.splitlines() if "not exactly-once" in line]
    assert len(said) == 1 and "output - " in said[0]  # said once, at start


async def test_stdout_csv(tmp_path: Path) -> None:
    _, stdout, _ = await eclaw_forked(
        "crawl", SPIDER, "-a", "base_url=http://127.0.0.1:1", "-o", "stdout:csv", "-s", "store=",
        "-s", "max_pages=0", "-q", cwd=tmp_path, env=ENV, wait=60,
    )  # fmt: skip
    assert stdout == "", stdout  # no item, no log line, no summary on stdout


async def test_an_unknown_format_or_scheme_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for spec, said in [("items.yaml", "unsupported output format '.yaml'"),
                       ("nosuch://x/items.jsonl", "unknown output destination (URL scheme) 'nosuch'")]:  # fmt: skip
        code, stdout, stderr = await eclaw_forked("crawl", SPIDER, "-o", spec, "-s", "store=", cwd=tmp_path, env=ENV)
        assert code == 2, stderr
        assert said in stderr
        assert len(stderr.strip().splitlines()) == 1, stderr
        assert stdout == ""

