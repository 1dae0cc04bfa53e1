"""The process of a job: ``python -m eclaw.service.launch COMMAND ...`` runs ``eclaw COMMAND ...``
with the job's arguments (``-a NAME=VALUE``) read from its stdin instead of its command line.

A process's command line is world-readable (``/proc/PID/cmdline``, ``ps``): a spider argument given
there, a password or a URL with credentials, would be seen by every user of the machine. The service
writes the arguments as one JSON object on the pipe and closes it; this module reads them (at most
:data:`MAX_INPUT` bytes), points stdin at ``/dev/null`` and calls :func:`eclaw.cli.main.main` in the
same process, so they live only in its memory (the crawl redacts its secret ones in what it writes).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Sequence
from typing import BinaryIO

from eclaw.cli.main import main as eclaw_main

__all__ = ["MAX_INPUT", "argv_with_args", "main", "read_args"]

MAX_INPUT = 1 << 20  # 64 arguments of 4 KiB each fit many times over


def read_args(stream: BinaryIO) -> dict[str, str]:
    """The arguments on ``stream``: ``{"args": {NAME: VALUE}}`` as :class:`eclaw.service.jobs.JobManager`
    writes it (this module imports the CLI, which imports the service: it cannot import the writer);
    a ValueError if they are not that."""
    data = stream.read(MAX_INPUT + 1)
    if len(data) > MAX_INPUT:
        raise ValueError(f"over {MAX_INPUT} bytes")
    payload = json.loads(data or b"{}")
    found = payload.get("args", {}) if isinstance(payload, dict) else None
    if not isinstance(found, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
        raise ValueError("args must be an object of strings")
    return found


def argv_with_args(argv: Sequence[str], args: dict[str, str]) -> list[str]:
    """``eclaw``'s command line: ``argv`` then ``-a NAME=VALUE`` for each argument."""
    return [*argv, *(part for name, value in args.items() for part in ("-a", f"{name}={value}"))]


def main() -> int:
    """Read the arguments from stdin, then run ``eclaw ARGV -a ...``; its exit code (2: bad input)."""
    try:
        args = read_args(sys.stdin.buffer)
    except ValueError as exc:
        print(f"eclaw: error: the job's arguments on stdin: {exc}", file=sys.stderr)
        return 2
    null = os.open(os.devnull, os.O_RDONLY)  # the crawl reads nothing from the pipe: as other commands, /dev/null
    os.dup2(null, 0)
    os.close(null)
    code = eclaw_main(argv_with_args(sys.argv[1:], args))
    gc.freeze()  # as eclaw.cli.main.command: no last pass of the collector over every object at exit
    return code


if __name__ == "__main__":
    sys.exit(main())
