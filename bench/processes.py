"""Every core: the same CPU-bound crawl with ``--processes 1`` and ``--processes N``, side by side.

    python -m bench.processes [--pages 20000] [--repeats 3] [--processes 1,2] [--bound]

The bench catalogue (bench/site.py) is served by nginx pinned to CPU 0 and crawled at
concurrency 64 per process, the crawler not pinned (with N=2 it shares CPU 0 with the
server). Every run must write every page's item exactly once, or it does not count.
Reported per N: pages/s (wall clock from start to the outputs written, so start-up
and the export of the items are in it), the crawler's CPU (every process of it), the
server's CPU, and the speed-up over N=1 against the 0.8 x N target. ``--bound`` adds,
for each N above 1, N independent one-process crawls side by side, each following only
its own part's links (no coordination at all: the most N processes of any design can do
on this machine and this server), counted over the pages they crawled. Contenders
alternate; the table quotes medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.run import CACHE, RESULTS, ROOT, check_complete, command
from bench.site import generate, serve

TICKS = os.sysconf("SC_CLK_TCK")
PART_SPIDER = ROOT / "bench/contenders/eclaw_part_spider.py:PartSpider"


def cpu_of(name: str) -> float:
    """CPU seconds used so far by the processes called ``name``."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
            rest = fields[1].split()
            if fields[0].endswith("(" + name):
                total += int(rest[11]) + int(rest[12])
        except (OSError, IndexError, ValueError):
            continue
    return total / TICKS


def server_cpu() -> float:
    """CPU seconds used so far by every nginx process on this machine (the site's server)."""
    return cpu_of("nginx")


def run_once(processes: int, base: str, pages: int) -> dict[str, Any]:
    out = CACHE / f"out-processes-{processes}.jsonl"
    out.unlink(missing_ok=True)
    seconds, cpu, served = timed([[*command("eclaw", base, out), "--processes", str(processes)]])
    check_complete(f"--processes {processes}", out, pages)
    return {"name": f"--processes {processes}", "processes": processes, "seconds": seconds,
            "pages_per_s": pages / seconds, "crawler_cpu_s": cpu, "server_cpu_s": served}  # fmt: skip


def bound_once(processes: int, base: str) -> dict[str, Any]:
    """N one-process crawls side by side, each of its own part of the URLs (see PartSpider)."""
    argvs, outs = [], []
    for part in range(processes):
        out = CACHE / f"out-bound-{part}.jsonl"
        out.unlink(missing_ok=True)
        argv = command("eclaw", base, out)
        argv[argv.index(str(ROOT / "bench/contenders/eclaw_spider.py"))] = str(PART_SPIDER)
        argvs.append([*argv, "-a", f"part={part}", "-a", f"parts={processes}"])
        outs.append(out)
    seconds, cpu, served = timed(argvs)
    crawled = sum(len(out.read_text().splitlines()) for out in outs)
    return {"name": f"{processes} alone", "processes": processes, "seconds": seconds,
            "pages_per_s": crawled / seconds, "crawler_cpu_s": cpu, "server_cpu_s": served}  # fmt: skip


def timed(argvs: list[list[str]]) -> tuple[float, float, float]:
    """Run the commands side by side: wall seconds, their CPU seconds (children included), the server's."""
    served = server_cpu()
    started = time.perf_counter()
    with (CACHE / "out-processes.log").open("wb") as stderr:  # a file: a full pipe nobody reads stops them
        children = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr) for argv in argvs]
        cpu = 0.0
        for child in children:
            _, status, usage = os.wait4(child.pid, 0)
            cpu += usage.ru_utime + usage.ru_stime
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(f"{argvs} failed:\n{(CACHE / 'out-processes.log').read_text()[-2000:]}")
    return time.perf_counter() - started, cpu, server_cpu() - served


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--bound", action="store_true", help="also N independent crawls of the URL's parts")
    parser.add_argument("--out", default=str(RESULTS / "processes.json"))
    args = parser.parse_args()
    counts = [int(n) for n in args.processes.split(",")]
    CACHE.mkdir(parents=True, exist_ok=True)
    site = generate(args.pages, CACHE)
    runs = []
    with serve(site) as (base, server):
        for repeat in range(args.repeats):
            for n in counts:
                tries = [run_once(n, base, args.pages)] + ([bound_once(n, base)] if args.bound and n > 1 else [])
                for run in tries:
                    runs.append(run)
                    print(
                        f"  [{repeat + 1}/{args.repeats}] {run['name']}: {run['pages_per_s']:7.0f} pages/s, "
                        f"crawler {run['crawler_cpu_s']:6.1f} CPU s, {server} {run['server_cpu_s']:5.1f} CPU s",
                        flush=True,
                    )
    names = list(dict.fromkeys(run["name"] for run in runs))
    numbers = ("seconds", "pages_per_s", "crawler_cpu_s", "server_cpu_s")
    medians = {
        name: {"processes": next(r["processes"] for r in runs if r["name"] == name)}
        | {k: statistics.median(r[k] for r in runs if r["name"] == name) for k in numbers}
        for name in names
    }
    one = medians[names[0]]["pages_per_s"]
    print(f"\n{args.pages} pages, median of {args.repeats}, {os.cpu_count()} CPUs, {server} pinned to CPU 0")
    print("| run | pages/s | speed-up | target (0.8 x N) | crawler CPU s | server CPU s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in medians.items():
        print(
            f"| {name} | {m['pages_per_s']:.0f} | {m['pages_per_s'] / one:.2f}x | {0.8 * m['processes']:.1f}x "
            f"| {m['crawler_cpu_s']:.1f} | {m['server_cpu_s']:.1f} |"
        )
    report = {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pages": args.pages, "cpus": os.cpu_count(),
              "server": server, "medians": medians, "runs": runs}  # fmt: skip
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    sys.exit(main())
