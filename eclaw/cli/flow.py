"""``eclaw flow run|show|status``: flows from a Python file."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import sys
from pathlib import Path
from typing import Any

from eclaw.cli.common import pairs
from eclaw.exceptions import ConfigError, SpiderLoadError
from eclaw.flows.flow import Flow
from eclaw.flows.runner import FlowLogFilter, TaskRecord, load_records, run_flow
from eclaw.observe.logs import Redacting
from eclaw.spider import import_file

__all__ = ["add_parsers", "load_flow", "run"]

STORE = "eclaw-data/flows.sqlite"
DATA = "eclaw-data/flows"


def add_parsers(sub: Any) -> None:
    flow = sub.add_parser("flow", help="run, show or inspect a flow (a DAG of tasks)")
    commands = flow.add_subparsers(dest="flow_command", required=True)
    run = commands.add_parser("run", help="run a flow for a run key (default: today's date)")
    show = commands.add_parser("show", help="print the flow's DAG")
    status = commands.add_parser("status", help="each task's state for a run key")
    for parser in (run, show, status):
        parser.add_argument("file", help="PATH.py or PATH.py:flow_variable")
    for parser in (run, status):
        parser.add_argument("--run-key", default=None, help="state is kept per run key (default: today, UTC)")
        parser.add_argument("--store", default=STORE, help=f"the flows' state file (default {STORE})")
    run.add_argument("--force", action="append", default=[], metavar="TASK", help="re-run TASK and what follows it")
    run.add_argument("--backfill", default=None, metavar="FROM..TO", help="run each date key in a range, in order")
    run.add_argument("-a", "--arg", action="append", default=[], metavar="NAME=VALUE", help="a flow parameter")
    run.add_argument("--data-dir", default=DATA, help=f"spider tasks' items and the logs (default {DATA})")
    show.add_argument("--dot", action="store_true", help="Graphviz dot instead of a text tree")


def load_flow(spec: str) -> Flow:
    """The flow in ``PATH.py`` (its only :class:`Flow`) or ``PATH.py:name``."""
    path, _, wanted = spec.partition(".py:")
    path = path + ".py" if wanted else spec
    module = import_file(path, "flow")
    flows = {name: obj for name, obj in vars(module).items() if isinstance(obj, Flow)}
    if wanted:
        if wanted in flows:
            return flows[wanted]
        found = {f.name: f for f in flows.values()}
        if wanted in found:
            return found[wanted]
        raise SpiderLoadError(f"no flow {wanted!r} in {path} (found: {', '.join(flows) or 'none'})")
    if len(flows) != 1:
        what = "no Flow" if not flows else f"several flows ({', '.join(flows)}): pick one with {path}:NAME"
        raise SpiderLoadError(f"{what} in {path}")
    return next(iter(flows.values()))


def _keys(backfill: str) -> list[str]:
    start, sep, end = backfill.partition("..")
    try:
        first, last = dt.date.fromisoformat(start), dt.date.fromisoformat(end)
    except ValueError:
        raise ConfigError(f"--backfill expects FROM..TO dates (2026-11-01..2026-11-07), got {backfill!r}") from None
    if not sep or last < first:
        raise ConfigError(f"--backfill range is empty: {backfill!r}")
    return [(first + dt.timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


def today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def run(args: argparse.Namespace) -> int:
    params = pairs(getattr(args, "arg", []), "-a")
    flow = load_flow(args.file)
    if args.flow_command == "show":
        print(flow.dot() if args.dot else flow.show())
        return 0
    if args.flow_command == "status":
        key = args.run_key or today()
        records = load_records(Path(args.store), flow.name, key)
        print(_status(flow, key, records))
        return 0
    if args.backfill and args.run_key:
        raise ConfigError("give --run-key or --backfill, not both")
    keys = _keys(args.backfill) if args.backfill else [args.run_key or today()]
    flow.order()  # a bad graph fails before anything runs
    _console()
    failed = 0
    for key in keys:
        records = asyncio.run(
            run_flow(flow, key, store=args.store, data_dir=args.data_dir, params=params, force=args.force)
        )
        print(_status(flow, key, records))
        failed += any(r.state not in ("success", "skipped") for r in records.values())
    return 1 if failed else 0


def _console() -> None:
    """Console lines carry the run id, task and attempt, like the run's log file."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(FlowLogFilter())
    handler.addFilter(Redacting())  # inside a spider task, its crawl's redactor
    line = "%(asctime)s %(levelname)-7s run=%(run_id)s task=%(task)s attempt=%(attempt)s %(message)s"
    handler.setFormatter(logging.Formatter(line))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    logging.getLogger("eclaw.core").setLevel(logging.WARNING)  # a spider task's own crawl lines


def _status(flow: Flow, key: str, records: dict[str, TaskRecord]) -> str:
    lines = [f"flow {flow.name} run key {key}", f"{'task':<24} {'state':<16} {'attempts':>8} {'secs':>8}  note"]
    for name in flow.order():
        record = records.get(name, TaskRecord(name))
        state = record.state
        note = "succeeded earlier, not run again" if record.cached else (record.error or "")
        took = f"{record.duration:.2f}" if record.duration is not None else "-"
        lines.append(f"{name:<24} {state:<16} {record.attempts:>8} {took:>8}  {note}")
    return "\n".join(lines)
