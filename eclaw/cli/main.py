"""Command line: ``eclaw crawl|replay|shell|fetch|parse|new|worker|seed|status|runs|trace|report|flow|list|demo|
serve|jobs|schedules|version`` (also ``python -m eclaw``). Each command lives in a module of this package.

Exit codes: 0 the crawl finished (or paused with its state saved) and every item
reached every output; 1 an unexpected error (a bug: a traceback is shown); 2 bad
input (one line on stderr, nothing crawled is lost); 3 the crawl ran, but items
were dead-lettered or lost (see the dead-letter file); 130 stopped by a second
Ctrl-C.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Sequence

from eclaw.cli import cluster, crawl, demo, fetch, flow, inspect, jobs, new, parse, replay, serve, shell
from eclaw.exceptions import EclawError

__all__ = ["command", "main"]

Command = Callable[[argparse.Namespace], int]
COMMANDS: dict[str, Command] = {
    "crawl": crawl.run,
    "demo": demo.run,
    "flow": flow.run,
    "fetch": fetch.run,
    "parse": parse.run,
    "replay": replay.run,
    "shell": shell.run,
    "new": new.run,
    **dict.fromkeys(("worker", "seed", "status"), cluster.run),
    **inspect.COMMANDS,
    "serve": serve.run,
    **jobs.COMMANDS,
}


def parser() -> argparse.ArgumentParser:
    """The whole command line (the reference documentation is generated from it)."""
    parser = argparse.ArgumentParser(prog="eclaw", description="Event-driven asyncio web crawler.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (crawl, replay, shell, fetch, parse, new, inspect, demo, flow, cluster, serve, jobs):
        module.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``eclaw`` command; returns the exit code."""
    args = parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except EclawError as exc:
        print(f"eclaw: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("eclaw: interrupted", file=sys.stderr)
        return 130


def command() -> int:
    """The ``eclaw`` command (and ``python -m eclaw``): :func:`main`, then an exit without the cycle
    collector's last pass over every object of the process (everything is closed by then; the pass
    took 40 of the 50 ms the interpreter's shutdown took on the bench machine)."""
    code = main()
    gc.freeze()
    return code
