"""Soak test: crawl an endless local site full of faults for N minutes, sampling RSS.

    python -m bench.soak [--minutes 10] [--concurrency 64]    (make soak)

The site (in its own process, so only the crawler's memory is measured) has
64 chains of pages: /p/n links to /p/n+64 (new) and to a few pages already
seen (duplicates), so the frontier stays small and any growth in memory is
the crawler's own. Every 50th page answers 503 once, every 97th is a 404,
every 89th is slow (2 s, past the 1 s timeout once), every 113th resets the
connection. The crawler's RSS is sampled every 5 s; the report compares
the first minute after warm-up with the last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.site import app_process
from eclaw import Engine, Response, Settings, Spider
from eclaw.middlewares import Retry, UserAgent

CHAINS = 64
RESULTS = Path(__file__).resolve().parent / "results"


def site() -> web.Application:
    seen: set[int] = set()

    async def page(request: web.Request) -> web.StreamResponse:
        n = int(request.match_info["n"])
        first = n not in seen
        seen.add(n)
        if n and n % 50 == 0 and first:
            return web.Response(status=503, text="busy")
        if n and n % 97 == 0:
            return web.Response(status=404, text="gone")
        if n and n % 89 == 0 and first:
            await asyncio.sleep(2)
        if n and n % 113 == 0:
            if request.transport is not None:
                request.transport.abort()
            return web.Response()
        links = [n + CHAINS, max(0, n - 1), n // 2, n // 3, n - CHAINS if n >= CHAINS else 0]
        anchors = "".join(f'<a href="/p/{m}#x">{m}</a> ' for m in links)
        body = f"<html><head><title>page {n}</title></head><body><h1>{n}</h1>{anchors}{'x' * 4000}</body></html>"
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/p/{n}", page)
    return app


class SoakSpider(Spider):
    name = "soak"

    def parse(self, response: Response) -> Any:
        yield {"n": response.css("h1::text").get()}
        yield from response.follow_all(css="a")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def soak(base: str, minutes: float, concurrency: int, out: Path) -> dict[str, Any]:
    settings = Settings(
        concurrency=concurrency, concurrency_per_domain=concurrency, timeout=1.0, failures=str(out / "failures.jsonl")
    )
    engine = Engine(settings, middlewares=[Retry(3, base=0.05, cap=0.5), UserAgent()], outputs=[out / "items.jsonl"])
    samples: list[tuple[float, float, int]] = []
    async with engine:
        crawl = engine.prepare(SoakSpider, start_urls=[f"{base}/p/{n}" for n in range(CHAINS)])
        task = asyncio.create_task(engine.run_crawl(crawl))
        started = time.monotonic()
        while time.monotonic() - started < minutes * 60 and not task.done():
            await asyncio.sleep(5)
            samples.append((time.monotonic() - started, rss_mb(), crawl.stats.responses_downloaded))
        engine.stop("soak over")
        stats = await task
    return {"samples": samples, "stats": stats.as_dict()}


def report(result: dict[str, Any], minutes: float) -> dict[str, Any]:
    samples = result["samples"]
    warm = [rss for t, rss, _ in samples if 60 <= t < 120]
    last = [rss for t, rss, _ in samples if t >= minutes * 60 - 60]
    stats = result["stats"]
    summary = {
        "minutes": minutes,
        "pages": samples[-1][2] if samples else 0,
        "pages_per_s": round(samples[-1][2] / samples[-1][0], 1) if samples else 0,
        "rss_mb_after_warmup_median": round(statistics.median(warm), 1) if warm else None,
        "rss_mb_last_minute_median": round(statistics.median(last), 1) if last else None,
        "rss_mb_max": round(max(rss for _, rss, _ in samples), 1) if samples else None,
        "requests_generated": stats["requests_generated"],
        "failed_by_reason": stats["failed_by_reason"],
        "retries": stats["retries"],
        "accounted": stats["requests_generated"]
        == stats["requests_parsed"] + stats["requests_failed"] + stats["requests_dropped"] + stats["requests_pending"],
    }
    if warm and last:
        summary["rss_growth_after_warmup"] = round(statistics.median(last) / statistics.median(warm) - 1, 3)
    print(f"{'minute':>6} {'pages':>9} {'RSS MB':>7}")
    for t, rss, pages in samples:
        if int(t) % 60 < 5:
            print(f"{t / 60:6.1f} {pages:9d} {rss:7.1f}")
    for key, value in summary.items():
        print(f"{key:32} {value}")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)  # internal: run the site
    args = parser.parse_args()
    if args.serve:
        web.run_app(site(), host="127.0.0.1", port=args.serve, print=None, access_log=None)
        return
    with app_process("bench.soak") as base, tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(soak(base, args.minutes, args.concurrency, Path(tmp)))
    summary = report(result, args.minutes)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "soak.json").write_text(json.dumps({"summary": summary, "samples": result["samples"]}, indent=1))


if __name__ == "__main__":
    main()
