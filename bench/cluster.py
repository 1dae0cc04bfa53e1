"""Scaling out: the same crawl on 1, 2 and 4 worker processes sharing a Redis frontier.

    python -m bench.cluster [--pages 1500] [--delay 0.1] [--workers 1,2,4] [--concurrency 8]
    python -m bench.cluster --repeats 5 --code .,../old     # this code and an older checkout, side by side
    python -m bench.cluster --launch commands               # only N worker commands (an older checkout has no
                                                            # eclaw worker --processes)
    python -m bench.cluster --monitor                       # what the workers send Redis, per page
    python -m bench.cluster --pages 10000 --delay 0 --concurrency 32 --workers 1,2 --out cluster-busy.json
                                                            # a site that answers at once: parsing is the limit

The site (in its own process) answers every page after ``--delay`` seconds, so
one worker is bound by its concurrency, not by CPU: N workers should fetch
about N times as many pages a second. Each run starts from an empty Redis
(``eclaw seed --reset``), then times N workers from start to the last exit,
and checks that every page's item is in Redis exactly once. N workers are
started two ways, side by side (``--launch both``): N ``eclaw worker``
commands, and one ``eclaw worker --processes N`` that forks them.

Besides that wall clock, each run is split in three: *start* (the workers'
start to the site's first request: Python start-up and joining the crawl),
*crawl* (the first request to the last page answered) and *tail* (the last
page to the last worker's exit: seeing the end, the merged stats); the crawl's
own speed-up is the *crawl* column's. Also: Redis commands per page (from
``INFO commandstats``) and the workers' CPU seconds. ``--code`` runs the workers
from other checkouts (a git worktree of an earlier commit) in the same session,
alternating with this one; the table quotes medians. ``--monitor`` records
the commands the workers send (Redis MONITOR, which slows Redis: its times are
not the benchmark's) and prints them per page, scripts by name.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from bench.site import app_process, free_port

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
FANOUT = 10
SPIDER = """
from eclaw import Spider

class Tree(Spider):
    name = "tree"

    def __init__(self, base_url="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [base_url + "/p/0"]

    def parse(self, response):
        yield {"page": int(response.css("h1::text").get())}
        yield from response.follow_all(css="a")
"""


def site(pages: int, delay: float) -> web.Application:
    times: dict[str, float] = {}  # wall clock of the first request and of the last page answered

    async def page(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        times.setdefault("first", time.time())
        await asyncio.sleep(delay)
        children = range(n * FANOUT + 1, min(n * FANOUT + FANOUT + 1, pages))
        links = "".join(f'<a href="/p/{m}">{m}</a>' for m in children)
        times["last"] = time.time()
        return web.Response(text=f"<html><body><h1>{n}</h1>{links}</body></html>", content_type="text/html")

    async def report(request: web.Request) -> web.Response:
        seen = dict(times)
        times.clear()
        return web.json_response(seen)

    app = web.Application()
    app.router.add_get("/p/{n}", page)
    app.router.add_get("/_times", report)
    return app


def eclaw(*args: str) -> list[str]:
    return [sys.executable, "-m", "eclaw", *args]


def redis_cli(redis_url: str, *args: str) -> str:
    return subprocess.run(["redis-cli", "-u", redis_url, *args], check=True, capture_output=True, text=True).stdout


def redis_calls(redis_url: str) -> int:
    """Commands Redis ran since the last CONFIG RESETSTAT (a script's own calls inside it not counted)."""
    total = 0
    for line in redis_cli(redis_url, "info", "commandstats").splitlines():
        if line.startswith("cmdstat_") and not line.startswith(("cmdstat_info", "cmdstat_config")):
            total += int(line.split("calls=")[1].split(",")[0])
    return total


def monitored(path: Path) -> dict[str, int]:
    """The commands clients sent in a MONITOR log (not those scripts ran inside Redis), scripts by name."""
    from eclaw.cluster import lua

    names = {hashlib.sha1(getattr(lua, n).encode()).hexdigest(): n for n in lua.__all__}
    counts: dict[str, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        if " lua]" in line or '"' not in line:
            continue
        words = line.split('"')
        command = words[1].lower()
        if command == "evalsha":
            command = names.get(words[3], "evalsha " + words[3][:8])
        counts[command] = counts.get(command, 0) + 1
    return counts


def site_times(base: str) -> dict[str, float]:
    out = subprocess.run(["curl", "-s", base + "/_times"], check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out))


@dataclass
class Setup:
    base: str  # the site
    redis_url: str
    spider: Path
    pages: int
    concurrency: int
    monitor: Path | None  # where MONITOR writes, if asked


def run(setup: Setup, workers: int, code: Path, forked: bool) -> dict:  # type: ignore[type-arg]
    base, redis_url, pages, monitor = setup.base, setup.redis_url, setup.pages, setup.monitor
    common = [str(setup.spider), "-a", f"base_url={base}", "--redis", redis_url, "-s", "log_level=WARNING"]
    subprocess.run(eclaw("seed", *common, "--reset"), check=True, stdout=subprocess.DEVNULL, cwd=code)
    site_times(base)
    redis_cli(redis_url, "config", "resetstat")
    limits = ["-s", f"concurrency={setup.concurrency}", "-s", "concurrency_per_domain=1000"]
    if monitor is not None:
        watch = subprocess.Popen(["redis-cli", "-u", redis_url, "monitor"], stdout=monitor.open("w"))
        time.sleep(0.2)
    before = os.times()
    started_wall, started = time.time(), time.perf_counter()
    commands = [eclaw("worker", *common, *limits, "--processes", str(workers))] if forked else [
        eclaw("worker", *common, *limits) for _ in range(workers)
    ]  # fmt: skip
    processes = [
        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=code) for command in commands
    ]
    for process in processes:  # the workers say little: their pipes cannot fill up
        _, err = process.communicate()
        if process.returncode:
            raise SystemExit(f"a worker failed:\n{err.decode()[-2000:]}")
    seconds = time.perf_counter() - started
    ended_wall, after = time.time(), os.times()
    if monitor is not None:
        watch.terminate()
        watch.wait()
    calls = redis_calls(redis_url)
    times = site_times(base)
    got = sorted(json.loads(line)["page"] for line in redis_cli(redis_url, "hvals", "eclaw:tree:items").splitlines())
    if got != list(range(pages)):
        raise SystemExit(f"{workers} workers: {len(got)} items for {pages} pages")
    return {
        "code": label(code, forked),
        "workers": workers,
        "seconds": seconds,
        "start": times["first"] - started_wall,
        "crawl": times["last"] - times["first"],
        "tail": ended_wall - times["last"],
        "redis_calls_per_page": calls / pages,
        "cpu_s": (after.children_user + after.children_system) - (before.children_user + before.children_system),
    }


def label(code: Path, forked: bool) -> str:
    """How a run's workers were started: ``code`` (N commands) or ``code --processes N`` (one, forking N)."""
    return f"{code} --processes N" if forked else str(code)


def median_rows(runs: list[dict], labels: list[str], counts: list[int], pages: int) -> list[dict]:  # type: ignore[type-arg]
    rows = []
    for code in labels:
        for n in counts:
            mine = [r for r in runs if r["code"] == code and r["workers"] == n]
            row = {key: statistics.median(r[key] for r in mine) for key in mine[0] if key != "code"}
            rows.append({"code": code, **row, "runs": len(mine)})
    for row in rows:
        one = next(r for r in rows if r["code"] == row["code"] and r["workers"] == counts[0])
        row["pages_per_s"] = pages / row["seconds"]
        row["speed_up"] = one["seconds"] / row["seconds"]
        row["crawl_speed_up"] = one["crawl"] / row["crawl"]
    return rows


def table(rows: list[dict]) -> str:  # type: ignore[type-arg]
    lines = [
        "| code | workers | seconds | pages/s | speed-up | start s | crawl s | tail s | crawl speed-up "
        "| Redis commands/page | worker CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['code']} | {r['workers']} | {r['seconds']:.2f} | {r['pages_per_s']:.1f} | {r['speed_up']:.2f}x "
            f"| {r['start']:.2f} | {r['crawl']:.2f} | {r['tail']:.2f} | {r['crawl_speed_up']:.2f}x "
            f"| {r['redis_calls_per_page']:.1f} | {r['cpu_s']:.1f} |"
        )
    return "\n".join(lines)


def measure(args: argparse.Namespace, codes: list[Path], counts: list[int], tmp: Path) -> list[dict]:  # type: ignore[type-arg]
    """Every run: repeats x worker counts x checkouts, alternated; a private redis-server and site."""
    spider = tmp / "tree.py"
    spider.write_text(SPIDER)
    port = free_port()
    redis_server = shutil.which("redis-server") or "redis-server"
    redis = subprocess.Popen(
        [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp)],
        stdout=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    monitor = tmp / "monitor.log" if args.monitor else None
    runs = []
    try:
        with app_process("bench.cluster", "--pages", str(args.pages), "--delay", str(args.delay)) as base:
            setup = Setup(base, f"redis://127.0.0.1:{port}/0", spider, args.pages, args.concurrency, monitor)
            for repeat in range(args.repeats):
                for n in counts:
                    for code, forked in variants(codes, args.launch):  # alternate: the noise falls on each alike
                        row = run(setup, n, code, forked)
                        runs.append(row)
                        name = label(Path(code.name), forked)
                        print(
                            f"  [{repeat + 1}/{args.repeats}] {name}: {n} workers {row['seconds']:6.2f}s "
                            f"(start {row['start']:.2f}, crawl {row['crawl']:.2f}, tail {row['tail']:.2f}), "
                            f"{row['redis_calls_per_page']:.1f} Redis commands/page, {row['cpu_s']:.1f} CPU s",
                            flush=True,
                        )
                        if monitor is not None:
                            sent = sorted(monitored(monitor).items(), key=lambda kv: -kv[1])
                            total = sum(count for _, count in sent) / args.pages
                            shown = ", ".join(f"{name} {count / args.pages:.2f}" for name, count in sent)
                            print(f"      sent by the workers, per page: {total:.2f} = {shown}", flush=True)
    finally:
        redis.terminate()
        redis.wait()
    return runs


def variants(codes: list[Path], launch: str) -> list[tuple[Path, bool]]:
    """Each checkout, its workers started as N commands, as one forking N (``--processes N``), or both."""
    ways = {"commands": [False], "forked": [True], "both": [False, True]}[launch]
    return [(code, forked) for code in codes for forked in ways]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=1500)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--code", default=str(ROOT), help="checkouts whose eclaw the workers run, comma-separated")
    parser.add_argument(
        "--launch", choices=["commands", "forked", "both"], default="both",
        help="N workers as N eclaw worker commands, as one eclaw worker --processes N, or both side by side",
    )  # fmt: skip
    parser.add_argument("--monitor", action="store_true", help="count what the workers send Redis (slower)")
    parser.add_argument("--out", default="cluster.json", help="the results' file name, in bench/results/")
    parser.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        web.run_app(site(args.pages, args.delay), host="127.0.0.1", port=args.serve, print=None, access_log=None)
        return
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is needed: apt-get install redis-server")
    codes = [Path(c).resolve() for c in args.code.split(",")]
    for code in codes:
        if not (code / "eclaw" / "__init__.py").is_file():
            raise SystemExit(f"--code {code}: no eclaw checkout there")
    counts = [int(n) for n in args.workers.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        runs = measure(args, codes, counts, Path(tmp))
    rows = median_rows(runs, [label(code, forked) for code, forked in variants(codes, args.launch)], counts, args.pages)
    print(f"\n{args.pages} pages, {args.delay * 1000:.0f} ms each, concurrency {args.concurrency} per worker, "
          f"median of {args.repeats}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(table(rows))
    if not args.monitor:  # MONITOR's runs are slower: not the benchmark's figures
        RESULTS.mkdir(parents=True, exist_ok=True)
        report = {"pages": args.pages, "delay": args.delay, "concurrency": args.concurrency, "rows": rows, "runs": runs}
        (RESULTS / args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
