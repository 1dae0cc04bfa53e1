"""Command line: ``eclaw crawl|worker|seed|status|runs|flow|list|demo|version`` (also ``python -m eclaw``).

Exit codes: 0 the crawl finished (or paused with its state saved) and every item
reached every output; 1 an unexpected error (a bug: a traceback is shown); 2 bad
input (one line on stderr, nothing crawled is lost); 3 the crawl ran, but items
were dead-lettered or lost (see the dead-letter file); 130 stopped by a second
Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eclaw.cli.cluster import add_parsers as add_cluster_parsers
from eclaw.cli.cluster import cluster_command
from eclaw.cli.flow import add_parser as add_flow_parser
from eclaw.cli.flow import flow_command
from eclaw.engine import Engine
from eclaw.exceptions import EclawError
from eclaw.observe.logs import LogContext, log_formatter
from eclaw.observe.progress import Progress
from eclaw.observe.report import lifecycle, read_trace, render_report
from eclaw.settings import Settings
from eclaw.spider import Spider, load_spider, load_spiders
from eclaw.stats import Stats
from eclaw.storage.files import resolve_path
from eclaw.storage.store import list_runs

__all__ = ["main"]

logger = logging.getLogger(__name__)


def _pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, sep, raw = value.partition("=")
        if not sep or not key.strip():
            raise EclawError(f"{flag} expects KEY=VALUE, got {value!r}")
        pairs[key.strip()] = raw
    return pairs


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eclaw", description="Event-driven asyncio web crawler.")
    sub = parser.add_subparsers(dest="command", required=True)

    crawl = sub.add_parser("crawl", help="run a spider from a Python file")
    crawl.add_argument("spider", help="PATH.py or PATH.py:SpiderClass")
    crawl.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        help="write items to FILE (.jsonl .json .csv .parquet .sqlite); default: the SQLite store",
    )
    crawl.add_argument("-s", "--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    crawl.add_argument("-a", "--arg", action="append", default=[], metavar="NAME=VALUE", help="spider argument")
    crawl.add_argument(
        "--state",
        default=None,
        metavar="DIR",
        help="save the crawl in DIR: Ctrl-C pauses it, the same command resumes it (also after a crash)",
    )
    crawl.add_argument("--redis", default=None, metavar="URL", help="share the frontier in Redis (also seeds it)")
    crawl.add_argument("--log-level", default=None, help="DEBUG, INFO, WARNING or ERROR")
    crawl.add_argument("--log-format", choices=["text", "json"], default=None, help="console and --log-file lines")
    crawl.add_argument("--log-file", default=None, help="also log to this file")
    crawl.add_argument(
        "--trace", default=None, metavar="FILE", help="record every event (JSONL) for eclaw trace/report"
    )
    crawl.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port")
    crawl.add_argument("-q", "--quiet", action="store_true", help="no live progress")

    lister = sub.add_parser("list", help="list the spiders in a file")
    lister.add_argument("path")

    demo = sub.add_parser("demo", help="crawl the bundled demo shop (or just serve it)")
    demo.add_argument("--serve", action="store_true", help="only serve the demo site")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=0, help="port to serve on (default: a free one)")
    demo.add_argument("-o", "--output", default="demo-items.jsonl")

    runs = sub.add_parser("runs", help="list past crawls recorded in the store")
    runs.add_argument("store", nargs="?", default=None, help="a store file or a spider name (default: all stores)")

    trace = sub.add_parser("trace", help="one request's life in a --trace file")
    trace.add_argument("file")
    which = trace.add_mutually_exclusive_group(required=True)
    which.add_argument("--url")
    which.add_argument("--request-id", type=int)
    report = sub.add_parser("report", help="an HTML report (charts) of a --trace file")
    report.add_argument("file")
    report.add_argument("-o", "--output", default="report.html")
    add_flow_parser(sub)
    add_cluster_parsers(sub)
    sub.add_parser("version", help="print the version")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``eclaw`` command; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except EclawError as exc:
        print(f"eclaw: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("eclaw: interrupted", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "version":
        from eclaw import __version__

        print(f"eclaw {__version__}")
        return 0
    if args.command == "list":
        for cls in load_spiders(args.path):
            print(f"{cls.name or '(no name)'}\t{args.path}:{cls.__name__}")
        return 0
    if args.command == "trace":
        print(lifecycle(read_trace(args.file), url=args.url, request_id=args.request_id))
        return 0
    if args.command == "report":
        page = render_report(read_trace(args.file), title=f"eclaw report: {args.file}")
        try:
            Path(args.output).write_text(page, encoding="utf-8")
        except OSError as exc:
            raise EclawError(f"cannot write the report {args.output}: {exc.strerror}") from None
        print(f"report written to {args.output}")
        return 0
    if args.command == "flow":
        return flow_command(args, _pairs(getattr(args, "arg", []), "-a"))
    settings = Settings.from_env()
    if args.command == "runs":
        return _runs(args.store, settings)
    if args.command in ("worker", "seed", "status"):
        given = _pairs(getattr(args, "set", []), "-s")
        _setup_logging(str(settings.replace(given).log_level))
        args.arg = _pairs(getattr(args, "arg", []), "-a")
        return cluster_command(args, settings, dict(given))
    if args.command == "demo":
        _setup_logging(settings.log_level)
        return asyncio.run(_demo(args, settings))
    overrides: dict[str, Any] = _pairs(args.set, "-s")
    if args.state is not None:
        overrides["state_dir"] = args.state
    if args.redis is not None:
        overrides["scheduler_url"] = args.redis
    for option in ("log_format", "log_file", "trace", "metrics_port"):
        if getattr(args, option) is not None:
            overrides[option] = getattr(args, option)
    settings.replace(overrides)  # a bad -s fails here, before any import work
    spider_cls = load_spider(args.spider)
    level = args.log_level or overrides.get("log_level") or overrides.get("LOG_LEVEL") or settings.log_level
    _setup_logging(str(level), str(settings.replace(overrides).log_format))
    effective = settings.replace(overrides)
    outputs = args.output or ([effective.store] if effective.store else [])
    engine = Engine(settings, overrides=overrides, outputs=outputs, store=effective.store or None)
    stats = asyncio.run(crawl_with_signals(engine, spider_cls, _pairs(args.arg, "-a"), quiet=args.quiet))
    state = str(resolve_path(effective.state_dir, spider_cls.name, effective.run_key)) if effective.state_dir else ""
    if stats.finish_reason == "already finished":
        print(f"crawl {spider_cls.name!r} already finished (state in {state}): nothing to do")
        return 0
    print(stats.summary())
    if state and stats.finish_reason != "finished" and not stats.finish_reason.startswith("closespider"):
        print(f"crawl paused: state saved in {state}; run the same command again to resume")
    if outputs:
        written = [
            str(resolve_path(o, spider_cls.name, effective.run_key)).replace("%(batch)05d", "*") for o in outputs
        ]
        print(f"items written to {', '.join(written)}")
    return _exit_code(stats)


def _exit_code(stats: Stats) -> int:
    """0 for a clean crawl, 3 when items missed an output (said on stderr, so a script notices)."""
    if stats.clean:
        return 0
    dead = sum(stats.items_dead_lettered.values())
    print(f"eclaw: {dead} items dead-lettered, {stats.items_lost} lost: not every item was stored", file=sys.stderr)
    return 3


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
        f"{'requests':>8} {'items':>6} {'failed':>6} warnings"
    )
    for file in files:
        for run in list_runs(file):
            stats = run["stats"]
            started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(run["started_at"]))
            took = f"{run['finished_at'] - run['started_at']:.1f}" if run["finished_at"] else "-"
            print(
                f"{run['id']:>4}  {run['spider']:<16} {run['run_key']:<12} {started:<19} {took:>7} "
                f"{run['finish_reason'] or 'running?':<10} {stats.get('requests_generated', 0):>8} "
                f"{stats.get('items_stored', 0):>6} {stats.get('requests_failed', 0):>6} {len(run['warnings'])}"
            )
    return 0


def _setup_logging(level: str, kind: str = "text") -> None:
    name = level.upper()
    if name not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise EclawError(f"bad log level {level!r} (use DEBUG, INFO, WARNING or ERROR)")
    handler = logging.StreamHandler()
    handler.addFilter(LogContext())
    handler.setFormatter(log_formatter(kind))
    logging.basicConfig(level=name, handlers=[handler], force=True)


async def crawl_with_signals(
    engine: Engine, spider: type[Spider], spider_args: dict[str, Any], *, quiet: bool = False
) -> Stats:
    """Run one crawl; SIGINT/SIGTERM stops it gracefully, a second one at once."""
    loop = asyncio.get_running_loop()
    crawl = engine.prepare(spider, **spider_args)
    task = asyncio.current_task()
    signals = 0

    def on_signal(signum: int) -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            logger.warning("%s: finishing in-flight requests (again to quit now)", signal.Signals(signum).name)
            engine.stop(f"shutdown ({signal.Signals(signum).name})")
        elif task is not None:
            task.cancel()

    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, on_signal, signum)
            installed.append(signum)
        except (NotImplementedError, RuntimeError):  # not the main thread / platform
            pass
    progress = None if quiet else asyncio.create_task(Progress(crawl.sample).run())
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    # The crawl makes and drops many short-lived objects (requests, responses): collect the young
    # generation every 20,000 allocations, not 700, and leave what start-up made out of full collections
    # (unless objects are frozen already, as Python 3.12 starts: unfreeze would thaw them too).
    if not frozen:
        gc.freeze()
    gc.set_threshold(max(thresholds[0], 20000), *thresholds[1:])
    try:
        async with engine:
            return await engine.run_crawl(crawl)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    finally:
        gc.set_threshold(*thresholds)
        if not frozen:
            gc.unfreeze()
        if progress is not None:
            progress.cancel()
        for signum in installed:
            loop.remove_signal_handler(signum)


async def _until_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


async def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from aiohttp import web

    from eclaw.demo.shop import ShopSpider
    from eclaw.demo.site import make_app

    runner = web.AppRunner(make_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise EclawError(f"cannot serve the demo site on {args.host}:{args.port}: {exc.strerror}") from None
    port = runner.addresses[0][1]
    base_url = f"http://{args.host}:{port}"
    try:
        if args.serve:
            print(f"demo shop at {base_url}/ (Ctrl-C to stop)", flush=True)
            await _until_signal()
            return 0
        print(f"demo shop at {base_url}/; crawling it with spiders/shop.py ...", flush=True)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        engine = Engine(settings, outputs=[args.output])
        stats = await crawl_with_signals(engine, ShopSpider, {"base_url": base_url})
    finally:
        await runner.cleanup()
    print(stats.summary())
    print(f"{stats.items_stored} items written to {args.output}")
    return _exit_code(stats)
