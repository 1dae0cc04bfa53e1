"""What a feature costs in instructions, which other processes on a shared machine cannot disturb:
each contender crawls the bench site under valgrind's callgrind, which counts the instructions
(``Ir``) the crawl's process executes.

    python -m bench.instructions --pages 2000 eclaw eclaw-observed eclaw@../main eclaw-observed@../main

The first contender also crawls ``--small`` pages, for the cost of its start-up; a contender's
instructions per page are its count beyond that start-up divided by the pages, and a feature's
cost the difference from plain ``eclaw`` (``eclaw@DIR``: the same checkout's) as a share of plain
eclaw's per page. Instructions are not time (string formatting runs more of them per nanosecond
than network code), so this ranks costs rather than predicting pages/s. Needs valgrind; a
2,000-page crawl takes about a minute.
"""

from __future__ import annotations

import argparse
import re
import subprocess

from bench.run import CACHE, command, env_for
from bench.site import generate, serve


def instructions(name: str, pages: int) -> int:
    """The instructions of one crawl of ``pages`` pages by contender ``name``."""
    site = generate(pages, CACHE)
    with serve(site) as (base, _):
        out = CACHE / f"ir-{name.replace('/', '_')}.jsonl"
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command(name, base, out)]
        run = subprocess.run(cmd, env=env_for(name), capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"{name} failed under valgrind (exit {run.returncode}):\n{run.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("contenders", nargs="+")
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--small", type=int, default=300, help="pages of the start-up run")
    args = parser.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    first = args.contenders[0]
    small = instructions(first, args.small)
    counts = {name: instructions(name, args.pages) for name in args.contenders}
    per_page_first = (counts[first] - small) / (args.pages - args.small)
    startup = small - per_page_first * args.small
    print(f"start-up {startup / 1e9:.2f} G instructions ({first} at {args.small} pages)")
    for name, total in counts.items():
        per_page = (total - startup) / args.pages
        _, at, checkout = name.partition("@")
        plain = "eclaw" + at + checkout
        cost = (total - counts[plain]) / args.pages / per_page_first if plain in counts and name != plain else None
        share = f"  {100 * cost:+.1f} %" if cost is not None else ""
        print(f"{name:<32} {total / 1e9:7.3f} G  {per_page / 1e3:7.0f} k/page{share}")


if __name__ == "__main__":
    main()
