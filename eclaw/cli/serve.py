"""``eclaw serve``: run the job service of a project directory (see docs/operations.md)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from eclaw.exceptions import ConfigError

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    """Add ``serve`` to the command line."""
    p = sub.add_parser("serve", help="run jobs and schedules of a project behind a JSON API")
    p.add_argument("--project", required=True, metavar="DIR", help="the directory of spider files")
    p.add_argument("--host", default="127.0.0.1", help="bind address (not local: needs a token)")
    p.add_argument("--port", type=int, default=8700, help="the port of the API and the web UI (default 8700)")
    p.add_argument("--max-jobs", type=int, default=2, metavar="K", help="crawls at once; the rest queue (FIFO)")
    p.add_argument("--token", default=None, help="API token (default: $ECLAW_SERVE_TOKEN)")
    p.add_argument("--grace", type=float, default=10.0, metavar="S", help="seconds from SIGINT to SIGKILL on cancel")
    p.add_argument("--keep-jobs", type=int, default=100, metavar="N", help="finished jobs kept (the newest)")
    p.add_argument("--keep-days", type=float, default=30.0, metavar="D", help="finished jobs kept at most D days")
    p.add_argument("--alerts", default=None, metavar="FILE", help="alerts file: job failed, schedule missed")
    p.add_argument("--store", default=None, metavar="URI",
                   help="where jobs and schedules live: postgresql://user@host/db[?schema=NAME] or a SQLite file "
                        "(default: DIR/.eclaw-serve/service.db)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Run the service until stopped."""
    try:
        from eclaw.service.app import ServiceConfig, serve
    except ModuleNotFoundError as exc:
        raise ConfigError(f"eclaw serve needs the serve extra (pip install 'eclaw[serve]'): {exc}") from None

    config = ServiceConfig(
        project=Path(args.project), host=args.host, port=args.port, max_jobs=args.max_jobs,
        token=args.token or os.environ.get("ECLAW_SERVE_TOKEN") or None, grace=args.grace,
        keep_jobs=args.keep_jobs, keep_days=args.keep_days, alerts=args.alerts, store=args.store,
    )  # fmt: skip
    serve(config)
    return 0
