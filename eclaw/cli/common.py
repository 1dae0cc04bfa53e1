"""What the commands share: ``KEY=VALUE`` options, console logging, the exit code of a crawl."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from eclaw.exceptions import EclawError
from eclaw.observe.logs import LogContext, Redacting, log_formatter
from eclaw.security.redact import Redactor
from eclaw.stats import Stats

__all__ = ["exit_code", "pairs", "setup_logging"]


def pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, sep, raw = value.partition("=")
        if not sep or not key.strip():
            raise EclawError(f"{flag} expects KEY=VALUE, got {value!r}")
        pairs[key.strip()] = raw
    return pairs


def setup_logging(level: str, kind: str = "text", redactor: Redactor | None = None) -> None:
    """Console logging at ``level``, every line redacted (with ``redactor`` outside a crawl: the
    command line's secrets; inside one, the crawl's own)."""
    name = level.upper()
    if name not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise EclawError(f"bad log level {level!r} (use DEBUG, INFO, WARNING or ERROR)")
    handler = logging.StreamHandler()
    handler.addFilter(LogContext())
    handler.addFilter(Redacting(redactor))
    handler.setFormatter(log_formatter(kind))
    logging.basicConfig(level=name, handlers=[handler], force=True)


def exit_code(stats: Stats) -> int:
    """0 for a clean crawl, 3 when items missed an output (said on stderr, so a script notices)."""
    if stats.clean:
        return 0
    dead = sum(stats.items_dead_lettered.values())
    print(f"eclaw: {dead} items dead-lettered, {stats.items_lost} lost: not every item was stored", file=sys.stderr)
    return 3
