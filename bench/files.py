"""Files benchmark: eclaw's FilesPipeline vs Scrapy's FilesPipeline, side by side, alternated.

    python -m bench.files [--files 1000] [--size-mb 1] [--big-mb 1024] [--repeats 2] [--cases many,big]

A local nginx (plain HTTP, sendfile) serves ``--files`` distinct files of ``--size-mb`` MB (case
``many``: one item per file) and one file of ``--big-mb`` MB (case ``big``: one item), plus a list
page of their URLs. Each contender is a child process that fetches the list and yields items whose
``file_urls`` name the files, into a fresh store; both run with 16 requests at once, 16 per host,
no size limit under 2 GiB, no robots.txt. Contenders alternate (eclaw scrapy, scrapy eclaw, ...).
Measured per run from the child's ``wait4`` rusage: wall seconds, files/s, CPU seconds (user +
system) and peak RSS; the table quotes medians. Results also go to bench/results/files.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
GIB2 = 2 * 1024**3

CONF = """
{user}worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 512; }}
http {{
    types {{ text/plain txt; application/octet-stream bin; }}
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    access_log off;
    sendfile on;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
}}
"""


@contextmanager
def nginx(root: Path) -> Iterator[str]:
    """nginx serving ``root`` on a free port: its base URL."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        user = "user root;\n" if os.geteuid() == 0 else ""
        conf = Path(tmp) / "nginx.conf"
        conf.write_text(CONF.format(user=user, tmp=tmp, port=port, root=root))
        process = subprocess.Popen([NGINX, "-c", str(conf), "-p", tmp], stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib.request.urlopen(base + "/many.txt", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    process.kill()
                    raise RuntimeError("nginx did not start") from None
                time.sleep(0.05)
        try:
            yield base
        finally:
            process.terminate()
            process.wait()


def make_site(root: Path, files: int, size_mb: int, big_mb: int) -> None:
    """The files (distinct contents) and the list pages ``many.txt`` and ``big.txt``."""
    (root / "f").mkdir(parents=True, exist_ok=True)
    for n in range(files):
        path = root / "f" / f"{n}.bin"
        if not path.exists() or path.stat().st_size != size_mb * 2**20:
            path.write_bytes(n.to_bytes(4, "big") + os.urandom(size_mb * 2**20 - 4))
    (root / "many.txt").write_text("".join(f"/f/{n}.bin\n" for n in range(files)))
    big = root / "big.bin"
    if not big.exists() or big.stat().st_size != big_mb * 2**20:
        with big.open("wb") as out:
            block = os.urandom(2**20)
            for _ in range(big_mb):
                out.write(block)
    (root / "big.txt").write_text("/big.bin\n")


def run_eclaw(listing: str, store: str) -> None:
    import asyncio

    from eclaw import Engine, Settings, Spider
    from eclaw.media import FilesPipeline

    class Files(Spider):
        name = "files"
        pipelines = [FilesPipeline]
        start_urls = [listing]

        def parse(self, response: Any) -> Any:
            for line in response.text.split():
                yield {"file_urls": [response.urljoin(line)]}

    settings = Settings(files_store=store, store="", concurrency=16, concurrency_per_domain=16,
                        files_max_size=GIB2, log_level="WARNING")  # fmt: skip

    async def crawl() -> None:
        async with Engine(settings) as engine:
            await engine.crawl(Files)

    asyncio.run(crawl())


def run_scrapy(listing: str, store: str) -> None:
    import scrapy
    from scrapy.crawler import CrawlerProcess

    class Files(scrapy.Spider):  # type: ignore[misc]
        name = "files"
        start_urls = [listing]

        def parse(self, response: Any) -> Any:
            for line in response.text.split():
                yield {"file_urls": [response.urljoin(line)]}

    process = CrawlerProcess(settings={
        "ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1}, "FILES_STORE": store,
        "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16, "DOWNLOAD_MAXSIZE": GIB2,
        "DOWNLOAD_WARNSIZE": 0, "ROBOTSTXT_OBEY": False, "LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False,
    })  # fmt: skip
    process.crawl(Files)
    process.start()


def measure(contender: str, listing: str, expected: int) -> dict[str, Any]:
    """One child run of ``contender`` on ``listing``, into a fresh store: its figures."""
    with tempfile.TemporaryDirectory() as store:
        start = time.monotonic()
        child = subprocess.Popen([sys.executable, "-m", "bench.files", "--child", contender, listing, store], cwd=ROOT)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - start
        stored = sum(1 for p in Path(store).rglob("*") if p.is_file() and p.suffix == ".bin")
    if os.waitstatus_to_exitcode(status) != 0 or stored != expected:
        raise RuntimeError(f"{contender} failed: exit {status}, {stored}/{expected} files stored")
    return {"wall": wall, "files_per_s": expected / wall, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--size-mb", type=int, default=1)
    parser.add_argument("--big-mb", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cases", default="many,big")
    parser.add_argument("--site", default=str(Path(tempfile.gettempdir()) / "eclaw-bench-files"))
    args = parser.parse_args()
    if args.child:
        contender, listing, store = args.child
        (run_eclaw if contender == "eclaw" else run_scrapy)(listing, store)
        return
    root = Path(args.site)
    make_site(root, args.files, args.size_mb, args.big_mb)
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with nginx(root) as base:
        for case in args.cases.split(","):
            expected = args.files if case == "many" else 1
            for repeat in range(args.repeats):
                order = ("eclaw", "scrapy") if repeat % 2 == 0 else ("scrapy", "eclaw")
                for contender in order:
                    run = measure(contender, f"{base}/{case}.txt", expected)
                    results.setdefault(case, {}).setdefault(contender, []).append(run)
                    print(case, contender, {k: round(v, 2) for k, v in run.items()}, flush=True)
    (ROOT / "bench" / "results" / "files.json").write_text(json.dumps(results, indent=1))
    print(f"\n{'case':6} {'contender':9} {'wall s':>8} {'files/s':>9} {'CPU s':>7} {'peak RSS MB':>12}")
    for case, contenders in results.items():
        for contender, runs in contenders.items():
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(f"{case:6} {contender:9} {med['wall']:8.2f} {med['files_per_s']:9.1f} {med['cpu']:7.2f} "
                  f"{med['rss_mb']:12.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
