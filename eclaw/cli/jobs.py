"""``eclaw jobs …`` and ``eclaw schedules …``: the client of ``eclaw serve`` (its JSON API).

The server is ``--server URL`` (default ``$ECLAW_SERVER`` or http://127.0.0.1:8700); the token comes
from ``$ECLAW_SERVE_TOKEN``. Any error is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any

from eclaw.exceptions import ConfigError

__all__ = ["COMMANDS", "add_parsers", "request"]

_DEFAULT = "http://127.0.0.1:8700"
_TIMEOUT = 30.0


def request(server: str, method: str, path: str, body: Any = None) -> Any:
    """One API call; the decoded JSON answer, or a one-line ConfigError with the server's reason."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(server.rstrip("/") + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    token = os.environ.get("ECLAW_SERVE_TOKEN")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=_TIMEOUT) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            reason = json.loads(exc.read()).get("error") or exc.reason
        except ValueError:
            reason = exc.reason
        raise ConfigError(f"{exc.code}: {reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ConfigError(f"cannot reach {server}: {getattr(exc, 'reason', exc)}") from None


def add_parsers(sub: Any) -> None:
    """Add ``jobs`` and ``schedules`` to the command line."""
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument(
        "--server", default=os.environ.get("ECLAW_SERVER", _DEFAULT), metavar="URL",
        help="the eclaw serve to ask (default: $ECLAW_SERVER, else the local one); token from $ECLAW_SERVE_TOKEN",
    )  # fmt: skip
    server.add_argument("--json", action="store_true", help="print the API's JSON")
    jobs = sub.add_parser("jobs", help="start, list, show and cancel jobs of eclaw serve")
    jsub = jobs.add_subparsers(dest="action", required=True)
    start = jsub.add_parser("start", parents=[server], help="queue a job")
    start.add_argument("spider", help="a spider name or FILE.py:Class of the project")
    start.add_argument("-a", "--arg", action="append", default=[], metavar="NAME=VALUE", help="spider argument")
    start.add_argument("--monitors", default=None, metavar="FILE", help="a monitors file of the project")
    jsub.add_parser("list", parents=[server], help="jobs, newest first")
    for action, text in (("show", "one job"), ("cancel", "stop a job gracefully"), ("resume", "resume a stopped job"),
                         ("logs", "a job's log tail"), ("items", "a job's first items")):  # fmt: skip
        jsub.add_parser(action, parents=[server], help=text).add_argument("id", type=int, help="the job's id")
    schedules = sub.add_parser("schedules", help="add, list and remove cron schedules of eclaw serve")
    ssub = schedules.add_subparsers(dest="action", required=True)
    add = ssub.add_parser("add", parents=[server], help="add a schedule")
    add.add_argument("spider", help="a spider name or FILE.py:Class of the project")
    add.add_argument("cron", help="cron expression: 5 fields, or 6 with seconds last (quote it)")
    add.add_argument("--tz", default="UTC", help="IANA time zone (default UTC)")
    add.add_argument("--missed", choices=("skip", "catchup"), default="skip", help="missed slots after downtime")
    add.add_argument("-a", "--arg", action="append", default=[], metavar="NAME=VALUE", help="spider argument")
    ssub.add_parser("list", parents=[server], help="schedules")
    for action in ("show", "remove", "enable", "disable"):
        ssub.add_parser(action, parents=[server], help=f"{action} a schedule").add_argument(
            "id", type=int, help="the schedule's id"
        )


def _pairs(values: list[str]) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name:
            raise ConfigError(f"-a {value!r}: expected NAME=VALUE")
        pairs[name] = text
    return pairs


def _when(stamp: float | None) -> str:
    return datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S") if stamp else "-"


def _print_job(job: dict[str, Any]) -> None:
    print(f"{job['id']:>5}  {job['state']:<11} {job['items']:>7} items  {_when(job['created'])}  {job['spider']}"
          + (f"  ({job['reason']})" if job.get("reason") else ""))  # fmt: skip


def run_jobs(args: argparse.Namespace) -> int:
    """``eclaw jobs ACTION``."""
    if args.action == "start":
        body: dict[str, Any] = {"spider": args.spider, "args": _pairs(args.arg)}
        if args.monitors:
            body["monitors"] = args.monitors
        answer = request(args.server, "POST", "/api/jobs", body)
    elif args.action == "list":
        answer = request(args.server, "GET", "/api/jobs")
    elif args.action in ("cancel", "resume"):
        answer = request(args.server, "POST", f"/api/jobs/{args.id}/{args.action}")
    elif args.action in ("logs", "items"):
        answer = request(args.server, "GET", f"/api/jobs/{args.id}/{args.action}")
    else:
        answer = request(args.server, "GET", f"/api/jobs/{args.id}")
    if args.json:
        print(json.dumps(answer, indent=2))
    elif args.action == "list":
        for job in answer["jobs"]:
            _print_job(job)
    elif args.action == "logs":
        print("\n".join(answer["lines"]))
    elif args.action == "items":
        for item in answer["items"]:
            print(json.dumps(item, ensure_ascii=False))
    else:
        _print_job(answer)
    return 0


def run_schedules(args: argparse.Namespace) -> int:
    """``eclaw schedules ACTION``."""
    if args.action == "add":
        body = {"spider": args.spider, "cron": args.cron, "timezone": args.tz, "missed": args.missed,
                "args": _pairs(args.arg)}  # fmt: skip
        answer = request(args.server, "POST", "/api/schedules", body)
    elif args.action == "list":
        answer = request(args.server, "GET", "/api/schedules")
    elif args.action == "remove":
        answer = request(args.server, "DELETE", f"/api/schedules/{args.id}")
    elif args.action in ("enable", "disable"):
        answer = request(args.server, "PATCH", f"/api/schedules/{args.id}", {"enabled": args.action == "enable"})
    else:
        answer = request(args.server, "GET", f"/api/schedules/{args.id}")
    if args.json:
        print(json.dumps(answer, indent=2))
    elif args.action == "remove":
        print(f"removed schedule {answer['deleted']}")
    else:
        for schedule in answer["schedules"] if args.action == "list" else [answer]:
            state = "on " if schedule["enabled"] else "off"
            print(f"{schedule['id']:>4}  {state} {schedule['cron']!r:<20} {schedule['timezone']:<16} "
                  f"next {schedule['next_slot']}  fired {schedule['fired']}  {schedule['spider']}")  # fmt: skip
    sys.stdout.flush()
    return 0


COMMANDS = {"jobs": run_jobs, "schedules": run_schedules}
