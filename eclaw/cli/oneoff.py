"""What ``eclaw fetch``, ``parse`` and ``shell`` share: the spider options, a checked URL, a session."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from eclaw.cli.common import pairs
from eclaw.devloop.cookies import file_cookies, state_cookies
from eclaw.devloop.login import login_cookies
from eclaw.devloop.session import Session
from eclaw.exceptions import ConfigError
from eclaw.http import Request
from eclaw.spider import check_start_url, load_spider
from eclaw.storage.paths import resolve_path

__all__ = ["add_spider_options", "checked_url", "meta_option", "session_of"]


def add_spider_options(parser: Any, *, required: bool = False) -> None:
    parser.add_argument(
        "--spider", required=required, metavar="FILE", help="PATH.py[:SpiderClass]: its settings and middlewares"
    )
    parser.add_argument("-a", "--arg", action="append", default=[], metavar="NAME=VALUE", help="spider argument")
    parser.add_argument("-s", "--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    saved = parser.add_mutually_exclusive_group()
    saved.add_argument("--state", metavar="DIR", help="send the cookies a paused crawl saved in DIR (its login)")
    saved.add_argument("--cookies", metavar="FILE", help="send the cookies of FILE (Netscape cookies.txt or JSON)")
    saved.add_argument(
        "--login", action="store_true", help="run --spider's start until its login form is answered; keep its cookies"
    )


def session_of(args: argparse.Namespace, *, check_status: bool = False) -> Session:
    """The session of the command's ``--spider``, ``-a`` and ``-s`` (a bad one is a one-line error),
    with the cookies of ``--state``, ``--cookies`` or the spider's ``--login``."""
    overrides = pairs(args.set, "-s")
    spider = load_spider(args.spider) if args.spider else None
    spider_args = pairs(args.arg, "-a")
    session = Session.of(spider, spider_args, overrides, check_status=check_status)
    if args.login:
        if spider is None:
            raise ConfigError("--login needs --spider FILE: the spider whose start logs in")
        session.use_cookies(asyncio.run(login_cookies(spider, spider_args, overrides)))
    elif args.state:
        session.use_cookies(state_cookies(resolve_path(args.state, session.spider.name, session.settings.run_key)))
    elif args.cookies:
        session.use_cookies(file_cookies(args.cookies))
    return session


def checked_url(url: str) -> str:
    """``url`` as a request would fetch it; a URL without a scheme is a one-line error."""
    if "://" not in url:
        raise ConfigError(f"URL {url!r} has no scheme: did you mean https://{url.lstrip('/')}?")
    checked = Request(url).url
    check_start_url(checked)
    return checked


def meta_option(text: str | None) -> dict[str, Any]:
    """``--meta JSON``: a JSON object, or a one-line error."""
    if not text:
        return {}
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--meta is not JSON: {exc.msg} (at character {exc.pos})") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"--meta must be a JSON object, got {type(meta).__name__}")
    return meta
