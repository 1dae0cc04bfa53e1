"""Every core: the same CPU-bound crawl with ``--processes 1`` and ``--processes N``, side by side.

    python -m bench.processes [--pages 20000] [--repeats 3] [--processes 1,2]

The bench catalogue (bench/site.py) is served by nginx pinned to CPU 0 and crawled at
concurrency 64 per process, the crawler not pinned (with N=2 it shares CPU 0 with the
server). Every run must write every page's item exactly once, or it does not count.
Reported per N: pages/s (wall clock from start to the outputs written, so the private
redis-server's start, the seed and the export are in it), the crawler's CPU (workers
and redis-server included), the server's CPU, and the speed-up over N=1 against the
0.8 x N target. Contenders alternate; the table quotes medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.run import CACHE, RESULTS, check_complete, command
from bench.site import generate, serve

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_of(name: str, parent: int | None = None) -> float:
    """CPU seconds used so far by the processes called ``name`` (children of ``parent`` if given)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
            rest = fields[1].split()
            if fields[0].endswith("(" + name) and (parent is None or int(rest[1]) == parent):
                total += int(rest[11]) + int(rest[12])
        except (OSError, IndexError, ValueError):
            continue
    return total / TICKS


def server_cpu() -> float:
    """CPU seconds used so far by every nginx process on this machine (the site's server)."""
    return cpu_of("nginx")


class RedisCpu(threading.Thread):
    """Samples the CPU of the crawl's private redis-server until it exits (its last reading stays)."""

    def __init__(self, crawl: int) -> None:
        super().__init__(daemon=True)
        self.crawl, self.seconds, self.done = crawl, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            self.seconds = max(self.seconds, cpu_of("redis-server", self.crawl))


def run_once(processes: int, base: str, pages: int) -> dict[str, float]:
    out = CACHE / f"out-processes-{processes}.jsonl"
    out.unlink(missing_ok=True)
    argv = [*command("eclaw", base, out), "--processes", str(processes)]
    served = server_cpu()
    started = time.perf_counter()
    log = CACHE / f"out-processes-{processes}.log"
    with log.open("wb") as stderr:  # a file, not a pipe: a full pipe nobody reads would stop the workers
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr)
        redis = RedisCpu(process.pid)
        redis.start()
        _, status, usage = os.wait4(process.pid, 0)
        redis.done.set()
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"--processes {processes} failed:\n{log.read_text()[-2000:]}")
    check_complete(f"--processes {processes}", out, pages)
    return {
        "processes": processes,
        "seconds": seconds,
        "pages_per_s": pages / seconds,
        "crawler_cpu_s": usage.ru_utime + usage.ru_stime,  # its workers and redis-server included (waited for)
        "redis_cpu_s": redis.seconds,  # of it, the private redis-server's (sampled every 0.2 s)
        "server_cpu_s": server_cpu() - served,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--out", default=str(RESULTS / "processes.json"))
    args = parser.parse_args()
    counts = [int(n) for n in args.processes.split(",")]
    CACHE.mkdir(parents=True, exist_ok=True)
    site = generate(args.pages, CACHE)
    runs = []
    with serve(site) as (base, server):
        for repeat in range(args.repeats):
            for n in counts:
                run = run_once(n, base, args.pages)
                runs.append(run)
                print(
                    f"  [{repeat + 1}/{args.repeats}] --processes {n}: {run['pages_per_s']:7.0f} pages/s, "
                    f"crawler {run['crawler_cpu_s']:6.1f} CPU s (redis {run['redis_cpu_s']:4.1f}), "
                    f"{server} {run['server_cpu_s']:5.1f} CPU s",
                    flush=True,
                )
    medians = {n: {k: statistics.median(r[k] for r in runs if r["processes"] == n) for k in runs[0]} for n in counts}
    one = medians[counts[0]]["pages_per_s"]
    print(f"\n{args.pages} pages, median of {args.repeats}, {os.cpu_count()} CPUs, {server} pinned to CPU 0")
    print("| processes | pages/s | speed-up | target (0.8 x N) | crawler CPU s | of it redis-server | server CPU s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, m in medians.items():
        print(
            f"| {n} | {m['pages_per_s']:.0f} | {m['pages_per_s'] / one:.2f}x | {0.8 * n:.1f}x "
            f"| {m['crawler_cpu_s']:.1f} | {m['redis_cpu_s']:.1f} | {m['server_cpu_s']:.1f} |"
        )
    report = {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pages": args.pages, "cpus": os.cpu_count(),
              "server": server, "medians": medians, "runs": runs}  # fmt: skip
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    sys.exit(main())
