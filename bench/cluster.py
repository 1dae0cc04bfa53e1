"""Scaling out: the same crawl on 1, 2 and 4 worker processes sharing a Redis frontier.

    python -m bench.cluster [--pages 1500] [--delay 0.1] [--workers 1,2,4] [--concurrency 8]

The site (in its own process) answers every page after ``--delay`` seconds, so
one worker is bound by its concurrency, not by CPU: N workers should fetch
about N times as many pages a second. Each run starts from an empty Redis
(``eclaw seed --reset``), then times N ``eclaw worker`` processes from start
to the last exit, and checks that every page's item is in Redis exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
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
    async def page(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        await asyncio.sleep(delay)
        children = range(n * FANOUT + 1, min(n * FANOUT + FANOUT + 1, pages))
        links = "".join(f'<a href="/p/{m}">{m}</a>' for m in children)
        return web.Response(text=f"<html><body><h1>{n}</h1>{links}</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/p/{n}", page)
    return app


def eclaw(*args: str) -> list[str]:
    return [sys.executable, "-m", "eclaw", *args]


def run(base: str, redis_url: str, spider: Path, workers: int, pages: int, concurrency: int) -> dict[str, float]:
    common = [str(spider), "-a", f"base_url={base}", "--redis", redis_url, "-s", "log_level=WARNING"]
    subprocess.run(eclaw("seed", *common, "--reset"), check=True, stdout=subprocess.DEVNULL)
    limits = ["-s", f"concurrency={concurrency}", "-s", "concurrency_per_domain=1000"]
    started = time.perf_counter()
    processes = [
        subprocess.Popen(eclaw("worker", *common, *limits), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(workers)
    ]
    for process in processes:
        _, err = process.communicate()
        if process.returncode:
            raise SystemExit(f"a worker failed:\n{err.decode()[-2000:]}")
    seconds = time.perf_counter() - started
    out = subprocess.run(
        ["redis-cli", "-u", redis_url, "hvals", "eclaw:tree:items"], check=True, capture_output=True, text=True
    ).stdout
    got = sorted(json.loads(line)["page"] for line in out.splitlines() if line.strip())
    if got != list(range(pages)):
        raise SystemExit(f"{workers} workers: {len(got)} items for {pages} pages")
    return {"workers": workers, "seconds": round(seconds, 2), "pages_per_s": round(pages / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=1500)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        web.run_app(site(args.pages, args.delay), host="127.0.0.1", port=args.serve, print=None, access_log=None)
        return
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        raise SystemExit("redis-server is needed: apt-get install redis-server")
    with tempfile.TemporaryDirectory() as tmp:
        spider = Path(tmp) / "tree.py"
        spider.write_text(SPIDER)
        port = free_port()
        redis = subprocess.Popen(
            [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp],
            stdout=subprocess.DEVNULL,
        )
        time.sleep(0.5)
        try:
            with app_process("bench.cluster", "--pages", str(args.pages), "--delay", str(args.delay)) as base:
                results = [
                    run(base, f"redis://127.0.0.1:{port}/0", spider, int(n), args.pages, args.concurrency)
                    for n in args.workers.split(",")
                ]
        finally:
            redis.terminate()
            redis.wait()
    single = results[0]["pages_per_s"]
    print(f"{args.pages} pages, {args.delay * 1000:.0f} ms each, concurrency {args.concurrency} per worker")
    print(f"{'workers':>7} {'seconds':>8} {'pages/s':>8} {'speed-up':>9}")
    for row in results:
        row["speed_up"] = round(row["pages_per_s"] / single, 2)
        print(f"{row['workers']:>7} {row['seconds']:>8} {row['pages_per_s']:>8} {row['speed_up']:>8}x")
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = {"pages": args.pages, "delay": args.delay, "concurrency": args.concurrency, "runs": results}
    (RESULTS / "cluster.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
