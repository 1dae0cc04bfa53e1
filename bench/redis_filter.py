"""What a crawl's Redis spends on each new URL, by duplicate filter: redis-server's own CPU.

    python -m bench.redis_filter [--urls 20000] [--persist]

New URLs (50 hosts) are enqueued through the cluster frontier (``RedisFrontier.enqueue``, 100 a
call, as a page's links go) into a private redis-server, once with the Bloom filter (the default
sizing: a million URLs at one in a million, 20 hashes), once with ``dupefilter=set`` and once with
no filter (``dont_filter``); redis-server's ``used_cpu`` before and after gives its microseconds
a URL. ``--persist`` runs redis-server with its append-only file, fsync always (a crawl's Redis
that must lose nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from pathlib import Path

from eclaw import Request, Settings, Spider
from eclaw.cluster.frontier import RedisFrontier


class Links(Spider):
    name = "filter-bench"


async def cost(url: str, mode: str, urls: int) -> float:
    """redis-server's CPU microseconds a URL, for ``urls`` new URLs enqueued under ``mode``."""
    settings = Settings(concurrency=64, dupefilter="set" if mode == "set" else "bloom")
    frontier = RedisFrontier(url)
    await frontier.open(Links(), settings, lambda: None)
    try:
        assert frontier.redis is not None
        await frontier.redis.delete(*[frontier.prefix + key for key in ("bloom", "seen", "queue", "requests")])

        async def used() -> float:
            info = await frontier.redis.info("cpu")  # type: ignore[union-attr]
            return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

        before = await used()
        for batch in range(urls // 100):
            links = [f"http://h{n % 50}.test/{mode}/{batch}/{n}" for n in range(100)]
            await frontier.enqueue([Request(link, dont_filter=mode == "none") for link in links])
        return (await used() - before) / urls * 1e6
    finally:
        await frontier.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=20000)
    parser.add_argument("--persist", action="store_true", help="append-only file, fsync always")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eclaw-filter-bench-") as tmp:
        socket = Path(tmp) / "redis.sock"
        durable = ["--appendonly", "yes", "--appendfsync", "always"] if args.persist else ["--appendonly", "no"]
        server = await asyncio.create_subprocess_exec(
            shutil.which("redis-server") or "/usr/bin/redis-server", "--port", "0", "--unixsocket", str(socket),
            "--dir", tmp, "--save", "", *durable, stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            while not socket.exists():  # noqa: ASYNC110 - a stat while the server starts
                await asyncio.sleep(0.02)
            print(f"redis-server CPU a new URL ({args.urls} URLs, persist={args.persist}):")
            for mode in ("bloom", "set", "none"):
                print(f"  {mode:5s} {await cost(f'unix://{socket}', mode, args.urls):6.1f} µs")
        finally:
            server.terminate()
            await server.wait()


if __name__ == "__main__":
    asyncio.run(main())
