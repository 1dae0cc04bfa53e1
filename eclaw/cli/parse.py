"""``eclaw parse URL --spider FILE``: run a callback on one page (and ``--depth`` levels of the
pages it links to) and print the items, checked, and the requests it yields, like ``scrapy parse``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback
from typing import Any

from eclaw.cli.common import setup_logging
from eclaw.cli.oneoff import add_spider_options, checked_url, meta_option, session_of
from eclaw.devloop.callback import Parsed, crawl_from, resolve_callback
from eclaw.devloop.session import Session
from eclaw.exceptions import ConfigError, DownloadError, IgnoreRequest
from eclaw.http import Request
from eclaw.items import item_to_dict

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    parse = sub.add_parser("parse", help="run a spider's callback on one URL; print its items and requests")
    parse.add_argument("url", help="the URL of the page to parse")
    add_spider_options(parse, required=True)
    parse.add_argument("-c", "--callback", default=None, metavar="NAME", help="the spider's method (default: parse)")
    parse.add_argument("-d", "--depth", type=int, default=1, metavar="N", help="follow the requests N-1 levels down")
    parse.add_argument("-m", "--meta", default=None, metavar="JSON", help="the request's meta, a JSON object")


def run(args: argparse.Namespace) -> int:
    url = checked_url(args.url)
    meta = meta_option(args.meta)
    if args.depth < 1:
        raise ConfigError(f"--depth must be at least 1, got {args.depth}")
    session = session_of(args, check_status=True)
    callback = resolve_callback(session.spider, args.callback) if args.callback else None
    setup_logging("WARNING")
    return asyncio.run(_parse(session, Request(url, callback=callback, meta=meta), args.depth))


async def _parse(session: Session, request: Request, depth: int) -> int:
    bad = 0
    async with session:
        limit = session.settings.concurrency
        async for page in crawl_from(session.spider, session.fetch, request, depth=depth, concurrency=limit):
            bad += _show(page)
    return 1 if bad else 0


def _show(page: Parsed) -> int:
    """Print one page; returns how many problems it has."""
    request = page.request
    name = getattr(request.callback, "__name__", "parse") if request.callback else "parse"
    print(f"\n>>> depth {page.depth}: {request.url} ({name})")
    if page.error is not None:
        error = page.error
        if isinstance(error, DownloadError | IgnoreRequest):
            print(f"    failed: {error.reason}: {error}")
        else:
            print("    callback error:")
            print("".join(traceback.format_exception(error)).rstrip(), file=sys.stdout)
        return 1
    items, problems = page.outputs.items, page.problems
    print(f"# items ({len(items)})")
    for item, problem in zip(items, problems, strict=False):
        print(json.dumps(item_to_dict(item), ensure_ascii=False, default=str))
        if problem:
            print(f"    ^ invalid: {problem}")
    for problem in problems[len(items) :]:
        print(f"    ! {problem}")
    print(f"# requests ({len(page.outputs.requests)})")
    for new in page.outputs.requests:
        target = getattr(new.callback, "__name__", "parse") if new.callback else "parse"
        print(f"{new.method} {new.url}  -> {target}")
    return sum(1 for problem in problems if problem)
