"""``eclaw new project NAME`` and ``eclaw new spider NAME URL [--template ...]``."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from eclaw.cli.common import setup_logging
from eclaw.devloop.session import Session
from eclaw.devloop.templates import TEMPLATES, ApiGuess, guess_api, new_project, new_spider, render_spider, spider_path
from eclaw.exceptions import ConfigError, EclawError, IgnoreRequest
from eclaw.http import Request, Response

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    new = sub.add_parser("new", help="start a project, or a spider from a template")
    kinds = new.add_subparsers(dest="kind", required=True)
    project = kinds.add_parser("project", help="a project folder: pyproject, spiders/, tests/, README")
    project.add_argument("name", help="the project's name (its folder, its package)")
    project.add_argument("--url", default="https://example.com/", help="the example spider's start URL")
    spider = kinds.add_parser("spider", help="a spider file (in ./spiders/ when there is one)")
    spider.add_argument("name", help="the spider's name (its file: NAME.py)")
    spider.add_argument("url", help="the start URL")
    spider.add_argument(
        "-t",
        "--template",
        choices=TEMPLATES,
        default="basic",
        help="what the spider starts from (api: downloads URL once to see where records and next page are)",
    )


def run(args: argparse.Namespace) -> int:
    if args.kind == "project":
        root = new_project(args.name, url=args.url)
        print(f"project {args.name} in {root}/: cd {root}; python -m venv .venv; .venv/bin/pip install -e '.[test]'")
        return 0
    guess = None
    if args.template == "api":
        source = render_spider(args.name, args.url, "api")  # a bad name or URL is an error before any download
        if spider_path(args.name).exists():
            raise ConfigError(f"{spider_path(args.name)} already exists: not overwritten")
        guess = _look_at(args.url, source)
    path = new_spider(args.name, args.url, args.template, guess=guess)
    print(f"spider {args.name!r} in {path}: eclaw parse {args.url} --spider {path}")
    return 0


def _look_at(url: str, source: str) -> ApiGuess | None:
    """Where the API's first page keeps its records and next link (printed); ``None`` when it cannot be read."""
    setup_logging("WARNING")
    try:
        guess = guess_api(source, asyncio.run(_first_page(url)))
    except (EclawError, IgnoreRequest, ValueError) as exc:
        print(f"api: could not read {url} ({exc}): the spider tries every place of RECORDS and NEXT on each page")
        return None
    print(f"api: guessed from {url}: " + "; ".join(guess.lines()))
    return guess


async def _first_page(url: str) -> Response:
    async with Session.of(None, {}, {}, check_status=True) as session:
        return await session.fetch(Request(url, headers={"Accept": "application/json"}))
