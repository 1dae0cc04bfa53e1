"""The CPU cost of the escalation ladder where 5 % of the pages need the browser.

    python -m bench.ladder [--pages 1000] [--every 20] [--rounds 3] [--browser-only]

A local site (its own process) of ``--pages`` article pages, listed 100 to a page; one
page in ``--every`` (5 %) is an empty shell whose article a script of its own writes in.
Each contender crawls the whole site in a process of its own, and its CPU seconds are
those of that process and every process under it (Playwright's driver, Chromium), read
with ``getrusage(RUSAGE_CHILDREN)`` once it has ended:

- ``ladder``: ``-s ladder=plain,browser``, the spider knowing nothing of scripts; it says
  which callback must yield an item (``expect_items``), so a shell comes back empty and is
  fetched again in the browser, alone (the host stays on the plain client);
- ``hand``: the same spider, routing by hand: exactly the script pages are requested with
  ``render=True``, the others fetched plain, no ladder;
- ``browser`` (with ``--browser-only``): every page in the browser, for scale.

Rounds alternate the contenders; the figures are the medians. Results go to
``bench/results/ladder.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.testing import collect

RESULTS = Path(__file__).resolve().parent / "results" / "ladder.json"
PER_LIST = 100
PR_SET_CHILD_SUBREAPER = 36
FILLER = "<p>" + "Le conseil municipal s'est réuni mardi soir. " * 40 + "</p>"


def site(pages: int, every: int) -> web.Application:
    async def index(request: web.Request) -> web.Response:
        links = "".join(f"<a class='list' href='/list/{k}'>{k}</a> " for k in range(-(-pages // PER_LIST)))
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    async def listing(request: web.Request) -> web.Response:
        k = int(request.match_info["k"])
        numbers = range(k * PER_LIST, min(pages, (k + 1) * PER_LIST))
        links = "".join(f"<li><a class='page' href='/p/{n}'>Article {n}</a></li>" for n in numbers)
        return web.Response(text=f"<html><body><ul>{links}</ul></body></html>", content_type="text/html")

    async def article(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n % every == 0:  # the shell: the article comes with the script
            body = f"<main id='app'></main><script src='/js/{n}.js'></script>"
        else:
            body = f"<main><h1 class='title'>Article {n}</h1>{FILLER}</main>"
        return web.Response(text=f"<html><head><title>{n}</title></head><body>{body}</body></html>",
                            content_type="text/html")  # fmt: skip

    async def script(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        html = json.dumps(f"<h1 class='title'>Article {n}</h1>{FILLER}")
        return web.Response(text=f"document.getElementById('app').innerHTML = {html};",
                            content_type="application/javascript")  # fmt: skip

    app = web.Application()
    app.router.add_get("/", index)
    app.router.add_get("/list/{k}", listing)
    app.router.add_get("/p/{n}", article)
    app.router.add_get("/js/{n}.js", script)
    return app


class Articles(Spider):
    """Every article's title; ``every`` > 0 routes the script pages to the browser by hand."""

    name = "ladder-bench"
    expect_items = ("parse_article",)

    def __init__(self, base: str = "", every: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base, self.every = base, int(every)

    async def start_requests(self) -> AsyncIterator[Request]:
        yield Request(self.base + "/")

    def parse(self, response: Response) -> Iterator[Request]:
        yield from response.follow_all(css="a.list", callback=self.parse)
        for href in response.css("a.page::attr(href)").getall():
            render = self.every > 0 and int(href.rsplit("/", 1)[1]) % self.every == 0
            yield Request(response.urljoin(href), callback=self.parse_article, render=render)

    def parse_article(self, response: Response) -> Iterator[dict[str, str]]:
        title = response.css(".title::text").get()
        if title:
            yield {"title": title}


def adopt_orphans() -> None:
    """Make this process the reaper of its orphaned descendants (Chromium's processes outlive their
    parents at shutdown): reaped here, their CPU is in what the bench reads of this process."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_orphans() -> None:
    """Wait for every descendant left (their CPU time is added to this process's children's)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


async def crawl(contender: str, base: str, every: int) -> dict[str, Any]:
    """One contender's crawl, in this process."""
    options: dict[str, Any] = {"store": "", "retries": 0, "log_level": "WARNING"}
    if contender == "ladder":
        options["ladder"] = "plain,browser"
    elif contender == "browser":
        options["fetchers"] = "127.0.0.1=browser"
    started = time.perf_counter()
    items, stats = await collect(
        Articles, engine=Engine(Settings(**options)), base=base, every=every if contender == "hand" else 0
    )
    return {
        "items": len(items),
        "failed": stats.requests_failed,
        "wall_s": round(time.perf_counter() - started, 2),
        "fetcher_counters": {k: v for k, v in stats.counters.items() if k.startswith("fetcher ")},
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(contender: str, base: str, every: int) -> dict[str, Any]:
    """Run ``contender`` in a process of its own; its CPU seconds, with all its descendants'."""
    before = children_cpu()
    command = [sys.executable, "-m", "bench.ladder", "--contender", contender, "--base", base, "--every", str(every)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    cpu = children_cpu() - before
    if done.returncode != 0:
        raise SystemExit(f"{contender} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {"contender": contender, "cpu_s": round(cpu, 2), **result}


def serve_site(pages: int, every: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "bench.ladder", "--serve", str(port), "--pages", str(pages), "--every", str(every)]
    server = subprocess.Popen(command)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return server, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise SystemExit("the site did not start")


def compare(args: argparse.Namespace) -> dict[str, Any]:
    server, base = serve_site(args.pages, args.every)
    contenders = ["ladder", "hand", *(["browser"] if args.browser_only else [])]
    runs: list[dict[str, Any]] = []
    try:
        for number in range(args.rounds):
            for contender in contenders if number % 2 == 0 else reversed(contenders):
                runs.append(measured(contender, base, args.every))
                print(json.dumps(runs[-1]), flush=True)
    finally:
        server.terminate()
        server.wait(10)
    medians = {c: statistics.median(r["cpu_s"] for r in runs if r["contender"] == c) for c in contenders}
    return {
        "pages": args.pages,
        "script_pages": len(range(0, args.pages, args.every)),
        "rounds": args.rounds,
        "median_cpu_s": medians,
        "ratio_ladder_to_hand": round(medians["ladder"] / medians["hand"], 3),
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--every", type=int, default=20, help="one page in EVERY needs the browser")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--browser-only", action="store_true", help="also crawl every page in the browser")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--contender", choices=("ladder", "hand", "browser"), help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        web.run_app(site(args.pages, args.every), host="127.0.0.1", port=args.serve, access_log=None, print=None)
    elif args.contender:
        adopt_orphans()
        result = asyncio.run(crawl(args.contender, args.base, args.every))
        reap_orphans()
        print(json.dumps(result))
    else:
        summary = compare(args)
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(summary, indent=2) + "\n")
        shown = {k: v for k, v in summary.items() if k != "runs"}
        print(json.dumps(shown, indent=2))


if __name__ == "__main__":
    main()
