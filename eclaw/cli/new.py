"""``eclaw new project NAME`` and ``eclaw new spider NAME URL [--template ...]``."""

from __future__ import annotations

import argparse
from typing import Any

from eclaw.devloop.templates import TEMPLATES, new_project, new_spider

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    new = sub.add_parser("new", help="start a project, or a spider from a template")
    kinds = new.add_subparsers(dest="kind", required=True)
    project = kinds.add_parser("project", help="a project folder: pyproject, spiders/, tests/, README")
    project.add_argument("name")
    project.add_argument("--url", default="https://example.com/", help="the example spider's start URL")
    spider = kinds.add_parser("spider", help="a spider file (in ./spiders/ when there is one)")
    spider.add_argument("name")
    spider.add_argument("url")
    spider.add_argument("-t", "--template", choices=TEMPLATES, default="basic")


def run(args: argparse.Namespace) -> int:
    if args.kind == "project":
        root = new_project(args.name, url=args.url)
        print(f"project {args.name} in {root}/: cd {root}; python -m venv .venv; .venv/bin/pip install -e '.[test]'")
        return 0
    path = new_spider(args.name, args.url, args.template)
    print(f"spider {args.name!r} in {path}: eclaw parse {args.url} --spider {path}")
    return 0
