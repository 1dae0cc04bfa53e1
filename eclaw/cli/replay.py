"""``eclaw replay SPIDER --from DIR``: the spider again on a recording, offline; the diff against
the recorded run (exit 1 when anything differs)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from eclaw.cli.common import pairs, setup_logging
from eclaw.devloop.replay import Replayed, replay
from eclaw.exceptions import ConfigError
from eclaw.settings import Settings
from eclaw.spider import load_spider

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    parser = sub.add_parser("replay", help="re-run a spider on a crawl --record DIR offline; diff the results")
    parser.add_argument("spider", help="PATH.py or PATH.py:SpiderClass")
    parser.add_argument("--from", dest="folder", required=True, metavar="DIR", help="the recording")
    parser.add_argument("-a", "--arg", action="append", default=[], metavar="NAME=VALUE", help="spider argument")
    parser.add_argument("-s", "--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    parser.add_argument("--log-level", default="ERROR", help="DEBUG, INFO, WARNING or ERROR")


def run(args: argparse.Namespace) -> int:
    folder = Path(args.folder)
    if not (folder / "recording.json").is_file():
        raise ConfigError(f"{folder} is not a recording (no recording.json): crawl --record it first")
    overrides = pairs(args.set, "-s")
    settings = Settings.from_env()
    settings.replace(overrides)  # a bad -s fails here
    spider = load_spider(args.spider)
    setup_logging(args.log_level)
    spider_args = pairs(args.arg, "-a") or None
    outcome = asyncio.run(replay(spider, folder, args=spider_args, settings=settings, overrides=overrides))
    print(_report(outcome, folder))
    return 0 if outcome.diff.empty else 1


def _report(outcome: Replayed, folder: Path) -> str:
    recorded, replayed, diff = outcome.recorded, outcome.replayed, outcome.diff
    about = outcome.about
    lines = [
        f"replay of {about.get('spider', '?')!r} from {folder} (recorded {about.get('recorded_at', '?')}): "
        f"{replayed.pages} pages ({recorded.pages} recorded), "
        f"{len(replayed.items)} items ({len(recorded.items)} recorded)"
    ]
    missed = outcome.stats.counters.get("cache miss", 0)
    if missed:
        lines.append(f"{missed} requests were not in the recording (the recorded run did not fetch them): cache miss")
    if diff.empty:
        lines.append(f"no differences: {diff.same} items as recorded")
    else:
        lines.append(diff.render())
        counts = [
            f"{len(diff.removed)} removed", f"{len(diff.added)} added", f"{len(diff.changed)} changed",
            f"{len(diff.requests_added)}/{len(diff.requests_removed)} requests added/removed",
        ]  # fmt: skip
        lines.append(f"differences: items {', '.join(counts[:3])}, {diff.same} the same; {counts[3]}")
    return "\n".join(lines)
