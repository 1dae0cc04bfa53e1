"""``eclaw fetch URL``: one download through a spider's middlewares and settings; its status,
headers and body on stdout (or the body in a file)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from eclaw.cli.common import setup_logging
from eclaw.cli.oneoff import add_spider_options, checked_url, session_of
from eclaw.devloop.session import Session
from eclaw.exceptions import DownloadError, EclawError, IgnoreRequest
from eclaw.http import Request, Response

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    fetch = sub.add_parser("fetch", help="download one URL through a spider's middlewares; print it")
    fetch.add_argument("url", help="the URL to download")
    add_spider_options(fetch)
    fetch.add_argument("--headers", action="store_true", help="the request and response headers only, no body")
    fetch.add_argument("-o", "--output", default=None, metavar="FILE", help="write the body to FILE")


def run(args: argparse.Namespace) -> int:
    url = checked_url(args.url)
    session = session_of(args)
    setup_logging("WARNING")
    request = Request(url)
    try:
        response = asyncio.run(_fetch(session, request))
    except (DownloadError, IgnoreRequest) as exc:
        what = f"dropped ({exc.reason})" if isinstance(exc, IgnoreRequest) else f"failed: {exc}"
        print(f"eclaw: {request.url} {what}", file=sys.stderr)
        return 1
    _show(session, response, args)
    return 0


async def _fetch(session: Session, request: Request) -> Response:
    async with session:
        return await session.fetch(request)


def _show(session: Session, response: Response, args: argparse.Namespace) -> None:
    out = sys.stdout
    if args.headers and session.sent is not None:
        sent = session.sent
        print(f"> {sent.method} {sent.url}", file=out)
        for name, value in sent.headers.items():
            print(f"> {name}: {value}", file=out)
        print(file=out)
    print(f"{response.status} {response.url}", file=out)
    for name, value in response.headers.items():
        print(f"{name}: {value}", file=out)
    if args.output:
        try:
            Path(args.output).write_bytes(response.body)
        except OSError as exc:
            raise EclawError(f"cannot write {args.output}: {exc.strerror}") from None
        print(f"\n({len(response.body)} bytes written to {args.output})", file=out)
    elif not args.headers:
        print(file=out, flush=True)
        _body(response)


def _body(response: Response) -> None:
    """Text as text (in the terminal's encoding); binary bytes as they are, unless to a terminal."""
    if response.is_text:
        sys.stdout.write(response.text)
        if not response.text.endswith("\n"):
            sys.stdout.write("\n")
    elif sys.stdout.isatty():
        print(f"(a binary body of {len(response.body)} bytes: use -o FILE)")
    else:
        sys.stdout.buffer.write(response.body)
