"""``eclaw demo``: serve the bundled demo shop, and crawl it (or only serve it)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from eclaw.cli.common import exit_code, setup_logging
from eclaw.cli.crawl import crawl_with_signals, until_signal
from eclaw.engine import Engine
from eclaw.exceptions import EclawError
from eclaw.settings import Settings

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    demo = sub.add_parser("demo", help="crawl the bundled demo shop (or just serve it)")
    demo.add_argument("--serve", action="store_true", help="only serve the demo site")
    demo.add_argument("--host", default="127.0.0.1", help="address to serve on (default: 127.0.0.1)")
    demo.add_argument("--port", type=int, default=0, help="port to serve on (default: a free one)")
    demo.add_argument(
        "-o", "--output", default="demo-items.jsonl", help="write the items to FILE (default: demo-items.jsonl)"
    )


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    setup_logging(settings.log_level)
    return asyncio.run(_demo(args, settings))


async def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from aiohttp import web  # the server side of aiohttp, and the shop: not on every command's start-up

    from eclaw.demo.shop import ShopSpider
    from eclaw.demo.site import make_app

    runner = web.AppRunner(make_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise EclawError(f"cannot serve the demo site on {args.host}:{args.port}: {exc.strerror}") from None
    port = runner.addresses[0][1]
    base_url = f"http://{args.host}:{port}"
    try:
        if args.serve:
            print(f"demo shop at {base_url}/ (Ctrl-C to stop)", flush=True)
            await until_signal()
            return 0
        print(f"demo shop at {base_url}/; crawling it with spiders/shop.py ...", flush=True)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        engine = Engine(settings, outputs=[args.output])
        stats = await crawl_with_signals(engine, ShopSpider, {"base_url": base_url})
    finally:
        await runner.cleanup()
    print(stats.summary())
    print(f"{stats.items_stored} items written to {args.output}")
    return exit_code(stats)
