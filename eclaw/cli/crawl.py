"""``eclaw crawl``: one spider, from a Python file, with Ctrl-C as a pause when it has a ``--state``."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from eclaw.cli.common import exit_code, pairs, setup_logging
from eclaw.devloop.record import Recorder, recorder_for
from eclaw.engine import Engine
from eclaw.events import SpiderClosed, SpiderOpened
from eclaw.exceptions import ConfigError
from eclaw.observe.progress import Progress
from eclaw.outputs.build import output_name
from eclaw.outputs.spec import parse_spec
from eclaw.processes.crawl import check_saved, crawl_processes, processes_wanted
from eclaw.processes.group import failed_process
from eclaw.security.redact import Redactor
from eclaw.settings import Settings
from eclaw.spider import Spider, load_spider
from eclaw.stats import Stats
from eclaw.storage.paths import resolve_path

__all__ = ["add_parsers", "crawl_with_signals", "run", "until_signal"]

logger = logging.getLogger(__name__)


def add_parsers(sub: Any) -> None:
    crawl = sub.add_parser("crawl", help="run a spider from a Python file")
    crawl.add_argument("spider", help="PATH.py or PATH.py:SpiderClass")
    crawl.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        metavar="SPEC",
        help="write items to SPEC, repeatable: a path (format and compression by suffix: items.jsonl.gz), '-' for"
        " stdout (JSONL), a URL (file://, s3://...); PATH:FORMAT names the format; default: the SQLite store",
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
    crawl.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only; no live progress")
    crawl.add_argument(
        "--processes",
        default="1",
        metavar="N",
        help="run the crawl on N processes of this machine (auto: one per core), each its part of the URLs",
    )
    crawl.add_argument(
        "--record", default=None, metavar="DIR", help="keep every response and item in DIR for eclaw replay"
    )
    crawl.add_argument(
        "--monitors", default=None, metavar="FILE",
        help="check the run with the monitors (and send the [alerts]) of this TOML file; a failed monitor: exit 3",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from eclaw.monitors import monitoring_for  # the monitors and alerts load only for this command

    settings, overrides = _settings(args)
    spider_cls = load_spider(args.spider)
    effective = settings.replace(overrides)
    spider_args = pairs(args.arg, "-a")
    redactor = Redactor.for_spider(effective, spider_cls, spider_args)  # what the command line holds
    recorder = recorder_for(args.record, spider_cls, settings, overrides, redactor)
    level = (
        args.log_level
        or ("WARNING" if args.quiet else None)
        or overrides.get("log_level")
        or overrides.get("LOG_LEVEL")
        or settings.log_level
    )
    setup_logging(str(level), str(effective.log_format), redactor)
    outputs = args.output or effective.outputs.split() or ([effective.store] if effective.store else [])
    state = str(resolve_path(effective.state_dir, spider_cls.name, effective.run_key)) if effective.state_dir else ""
    processes = processes_wanted(args.processes)
    monitoring = monitoring_for(args.monitors, spider_cls, processes)  # a bad file: exit 2 before the crawl
    if state:
        check_saved(Path(state), processes)
    if processes > 1:
        if args.redis or recorder is not None or args.trace or args.metrics_port:
            raise ConfigError("--processes: not with --redis, --record, --trace or --metrics-port (one crawl each)")
        stats = crawl_processes(
            spider_cls, spider_args, processes=processes, settings=settings, overrides=overrides, outputs=outputs,
            state=state, runner=_quietly,
        )  # fmt: skip
    else:
        middlewares = recorder.middlewares() if recorder is not None else None
        engine = Engine(
            settings, overrides=overrides, outputs=outputs, store=effective.store or None, middlewares=middlewares
        )
        if recorder is not None:
            recorder.attach(engine)
        if monitoring is not None:
            monitoring.attach(engine)
        quiet = args.quiet or _to_stdout(outputs)  # no live table among the items
        stats = asyncio.run(crawl_with_signals(engine, spider_cls, spider_args, quiet=quiet))
    code = _report(args, stats, spider_cls.name, effective, outputs, state, recorder)
    return monitoring.exit_code(stats, code, sys.stderr if _to_stdout(outputs) else None) if monitoring else code


def _to_stdout(outputs: list[str]) -> bool:
    """An output writes the items on stdout (``-``, ``stdout:csv``): everything else goes to stderr."""
    return any(parse_spec(output).scheme == "stdout" for output in outputs)


def _settings(args: argparse.Namespace) -> tuple[Settings, dict[str, Any]]:
    """The environment's settings and the command line's overrides (checked: a bad ``-s`` is one line)."""
    settings = Settings.from_env()
    overrides: dict[str, Any] = pairs(args.set, "-s")
    if args.state is not None:
        overrides["state_dir"] = args.state
    if args.redis is not None:
        overrides["frontier_url"] = args.redis
    for option in ("log_format", "log_file", "trace", "metrics_port"):
        if getattr(args, option) is not None:
            overrides[option] = getattr(args, option)
    settings.replace(overrides)  # a bad -s fails here, before any import work
    return settings, overrides


def _report(
    args: argparse.Namespace, stats: Stats, name: str, effective: Settings, outputs: list[str], state: str,
    recorder: Recorder | None,
) -> int:  # fmt: skip
    out = sys.stderr if _to_stdout(outputs) else sys.stdout  # stdout holds the items: nothing else
    if stats.finish_reason == "already finished":
        print(f"crawl {name!r} already finished (state in {state}): nothing to do", file=out)
        return 0
    if recorder is not None:
        recorder.save(name, stats, args=pairs(args.arg, "-a"), spider_file=args.spider)
        print(f"recorded in {recorder.folder}: eclaw replay {args.spider} --from {recorder.folder}", file=out)
    print(stats.summary(), file=out)
    if state and stats.finish_reason != "finished" and not stats.finish_reason.startswith("closespider"):
        print(f"crawl paused: state saved in {state}; run the same command again to resume", file=out)
    if outputs:
        print(_written(stats, name, effective, outputs), file=out)
    code, failed = exit_code(stats), failed_process(stats.finish_reason)
    if failed is not None:  # killed, or out of memory: the others stopped (paused, with --state)
        resume = "; run the same command to resume" if state else ""
        said = f"eclaw: process {failed} of the crawl ended without finishing, the others stopped{resume}"
        print(said, file=sys.stderr)
        return code or 1
    return code


def _written(stats: Stats, name: str, effective: Settings, outputs: list[str]) -> str:
    """The final line: how many items each output holds (``wrote 500 items to a.jsonl, 500 to b.csv``)."""
    counts: list[str] = []
    for output in outputs:
        path = output_name(output, name, effective.run_key)
        if path not in stats.items_written:  # an output of pages, not items (its count is in the stats)
            continue
        count = stats.items_written[path]
        what = "" if counts else " item" if count == 1 else " items"  # said once, at the first
        counts.append(f"{count}{what} to {path.replace('%(batch)05d', '*')}")
    return "wrote " + ", ".join(counts) if counts else "wrote no items (the outputs take pages: see their counts above)"


async def crawl_with_signals(
    engine: Engine, spider: type[Spider], spider_args: dict[str, Any], *, quiet: bool = False
) -> Stats:
    """Run one crawl; SIGINT/SIGTERM stops it gracefully, a second one at once."""
    loop = asyncio.get_running_loop()
    progress = None if quiet else Progress()
    if progress is not None:  # a subscriber like any other
        engine.subscribe(SpiderOpened, progress.opened)
        engine.subscribe(SpiderClosed, progress.closed)
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
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, installed)  # a forked process starts with them blocked
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
            progress.stop()
        # blocked before (a forked process): one sent as its crawl ended, when the parent stops the others,
        # has nothing left to stop; ignored (any thread may take it), not a KeyboardInterrupt in its stats
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for signum in installed:
            loop.remove_signal_handler(signum)
            if signum in mask:
                signal.signal(signum, signal.SIG_IGN)


async def _quietly(engine: Engine, spider: type[Spider], spider_args: dict[str, str]) -> Stats:
    """One process's part of a crawl on several: no progress table (the parent prints the summary)."""
    return await crawl_with_signals(engine, spider, spider_args, quiet=True)


async def until_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
