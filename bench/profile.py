"""Where eclaw's CPU goes on the bench crawl: a py-spy sampling profile grouped by component.

    python -m bench.profile [--pages 20000]

Needs py-spy (in the bench extra). Samples the `eclaw crawl` process and
attributes each sample's innermost frame to a component, so the per-page
cost can be compared with the no-framework baseline's parse and download.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from bench.run import CACHE
from bench.run import command as crawl_command
from bench.site import generate, serve

GROUPS = [  # a sample goes to the first group one of whose needles its innermost frame's "file:function" or path holds
    ("idle worker thread (blocked, no CPU; left out)", ("thread.py:_worker",)),
    ("HTTP client (aiohttp, yarl, multidict)", ("aiohttp/", "yarl/", "multidict/")),
    ("event loop (asyncio, selectors)", ("asyncio/", "selectors.py:")),
    ("frontier: the disk past its window (SQLite)", ("eclaw/frontier/spill.py", "eclaw/frontier/serial.py")),
    (
        "frontier: dedupe (fingerprints, Bloom filter)",
        ("eclaw/frontier/dupefilter.py", "base.py:fingerprint", "urls.py:canonical_url", "urls.py:_fast_canonical"),
    ),
    (  # the floor's own (bench/contenders/broad_baseline.py) go to the groups of what they do, side by side
        "frontier: queues, politeness, checks",
        ("eclaw/frontier/", "broad_baseline.py:add", "broad_baseline.py:_offer", "broad_baseline.py:pump"),
    ),
    (
        "the page: callback, selectors, lxml, links",
        (
            "eclaw/http/",
            "parsel/",
            "lxml/",
            "cssselect/",
            "w3lib/",
            "broad_eclaw.py",
            "bench_spider",
            "broad_baseline.py:parse",
        ),
    ),
    (
        "fetchers, middlewares, sessions",
        ("eclaw/fetchers/", "eclaw/middlewares/", "eclaw/sessions/", "eclaw/security/", "broad_baseline.py:fetch"),
    ),
    ("core: bus, runners, accounting, stats", ("eclaw/core/", "eclaw/stats.py", "eclaw/events.py")),
    ("items out: pipelines, JSONL file", ("eclaw/storage/", "eclaw/outputs/", "eclaw/items.py", "json/")),
    ("start-up (imports)", ("importlib", "<frozen")),
]


def classify(frame: str) -> str:
    name, _, where = frame.partition(" (")
    file = where.split("/")[-1]
    key = f"{file.split(':')[0]}:{name.split('.')[-1]}"
    for group, needles in GROUPS:
        if any(n in key or n in where for n in needles):
            return group
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=20000)
    args = parser.parse_args()
    site = generate(args.pages, CACHE)
    with serve(site) as (base, _), tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "profile.txt"
        command = crawl_command("eclaw", base, Path(tmp) / "out.jsonl")
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        subprocess.run(
            [py_spy, "record", "-r", "250", "-f", "raw", "-o", str(raw), "--", *command],
            check=True,
            capture_output=True,
        )
        groups: Counter[str] = Counter()
        total = 0
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            total += int(count)
            groups[classify(stack.split(";")[-1])] += int(count)
    idle = groups.pop(GROUPS[0][0], 0)
    total -= idle
    print(f"{total} samples of the eclaw crawl of {args.pages} pages, by component (self time; {idle} idle left out):")
    for group, count in groups.most_common():
        print(f"  {100 * count / total:5.1f}%  {group}")


if __name__ == "__main__":
    main()
