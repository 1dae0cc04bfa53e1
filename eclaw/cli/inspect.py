"""Looking at what crawls left: ``eclaw list``, ``runs``, ``trace``, ``report``, ``version``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from eclaw import __version__
from eclaw.exceptions import ConfigError, EclawError
from eclaw.observe.report import lifecycle, read_trace, render_report
from eclaw.settings import Settings
from eclaw.spider import load_spiders
from eclaw.storage.paths import resolve_path
from eclaw.storage.store import list_runs

__all__ = ["COMMANDS", "add_parsers"]


def add_parsers(sub: Any) -> None:
    lister = sub.add_parser("list", help="list the spiders in a file")
    lister.add_argument("path", help="a spider file (PATH.py)")
    runs = sub.add_parser("runs", help="list past crawls recorded in the store")
    runs.add_argument("store", nargs="?", default=None, help="a store file or a spider name (default: all stores)")
    trace = sub.add_parser("trace", help="one request's life in a --trace file")
    trace.add_argument("file", help="the --trace file of a crawl (JSONL)")
    which = trace.add_mutually_exclusive_group(required=True)
    which.add_argument("--url", help="the request of this URL")
    which.add_argument("--request-id", type=int, metavar="N", help="the request of this id (in the trace)")
    report = sub.add_parser("report", help="an HTML report (charts) of a --trace file")
    report.add_argument("file", help="the --trace file of a crawl (JSONL)")
    report.add_argument("-o", "--output", default="report.html", help="the HTML file (default: report.html)")
    report.add_argument(
        "--monitors", metavar="FILE", help="a crawl's monitor results (eclaw-data/SPIDER.monitors.json) to show"
    )
    sub.add_parser("version", help="print the version")


def _version(args: argparse.Namespace) -> int:
    print(f"eclaw {__version__}")
    return 0


def _list(args: argparse.Namespace) -> int:
    for cls in load_spiders(args.path):
        print(f"{cls.name or '(no name)'}\t{args.path}:{cls.__name__}")
    return 0


def _trace(args: argparse.Namespace) -> int:
    print(lifecycle(read_trace(args.file), url=args.url, request_id=args.request_id))
    return 0


def _report(args: argparse.Namespace) -> int:
    monitors = _monitor_results(args.monitors)
    page = render_report(read_trace(args.file), title=f"eclaw report: {args.file}", monitors=monitors)
    try:
        Path(args.output).write_text(page, encoding="utf-8")
    except OSError as exc:
        raise EclawError(f"cannot write the report {args.output}: {exc.strerror}") from None
    print(f"report written to {args.output}")
    return 0


def _runs_command(args: argparse.Namespace) -> int:
    return _runs(args.store, Settings.from_env())


def _runs(target: str | None, settings: Settings) -> int:
    """``eclaw runs``: the runs recorded in one store, or in every store of the default directory."""
    if target is None:
        folder = resolve_path(settings.store or "eclaw-data/{spider}.sqlite", "x", settings.run_key).parent
        files = sorted(folder.glob("*.sqlite"))
    elif target.endswith((".sqlite", ".sqlite3", ".db")):
        files = [Path(target)]
    else:
        files = [resolve_path(settings.store, target, settings.run_key)]
    missing = [f for f in files if not f.exists()]
    if missing or not files:
        raise EclawError(f"no store at {missing[0] if missing else (target or 'eclaw-data/')}: nothing crawled yet?")
    print(
        f"{'id':>4}  {'spider':<16} {'run key':<12} {'started (UTC)':<19} {'secs':>7} {'finish':<10} "
        f"{'requests':>8} {'items':>6} {'new':>6} {'chg':>6} {'same':>6} {'gone':>6} {'failed':>6} warnings"
    )
    for file in files:
        for run in list_runs(file):
            stats = run["stats"]
            started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(run["started_at"]))
            took = f"{run['finished_at'] - run['started_at']:.1f}" if run["finished_at"] else "-"
            counters = stats.get("counters", {})
            store = [counters.get(f"store {n}", 0) for n in ("inserted", "updated", "unchanged", "gone")]
            print(
                f"{run['id']:>4}  {run['spider']:<16} {run['run_key']:<12} {started:<19} {took:>7} "
                f"{run['finish_reason'] or 'running?':<10} {stats.get('requests_generated', 0):>8} "
                f"{stats.get('items_stored', 0):>6} {''.join(f'{n:>6} ' for n in store)}"
                f"{stats.get('requests_failed', 0):>6} {len(run['warnings'])}"
            )
    return 0


def _monitor_results(file: str | None) -> dict[str, Any] | None:
    """``--monitors FILE`` read, or a one-line error."""
    if not file:
        return None
    try:
        results = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise ConfigError(f"--monitors {file}: cannot read its results ({why})") from None
    if not isinstance(results, dict):
        raise ConfigError(f"--monitors {file}: not a monitors results file (a JSON object)")
    return results


COMMANDS = {"version": _version, "list": _list, "trace": _trace, "report": _report, "runs": _runs_command}
