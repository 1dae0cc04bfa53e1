"""Replay: run a spider again on a recording, offline, and compare with what the recording saw.

The spider runs with its own settings and middlewares, and an ``HttpCache(DIR,
offline=True)`` innermost that answers every request from the recording (a request
the recorded run did not make fails as ``cache miss``). Nothing is written (no store,
no files of record); error snapshots are kept, as in any crawl.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eclaw.devloop.diff import Diff, compare
from eclaw.devloop.record import Capture, RunRecord
from eclaw.engine import Engine
from eclaw.exceptions import ConfigError
from eclaw.middlewares import HttpCache, defaults
from eclaw.security.redact import MASK
from eclaw.settings import Settings
from eclaw.spider import Spider
from eclaw.stats import Stats

__all__ = ["REPLAY_SETTINGS", "Replayed", "replay"]

logger = logging.getLogger(__name__)

# Offline and quick: no politeness waits (nothing goes to the network), nothing written but snapshots.
REPLAY_SETTINGS: dict[str, Any] = {
    "store": "",
    "failures": "",
    "drops": "",
    "dead_letter": "",
    "http_cache": "",
    "incremental": False,
    "state_dir": "",
    "frontier_url": "",
    "download_delay": 0.0,
    "host_delay": "",
    "autothrottle": False,
    "retries": 0,
}


@dataclasses.dataclass
class Replayed:
    """A replay's outcome: the :class:`Diff`, both runs, and the replay's stats."""

    diff: Diff
    recorded: RunRecord
    replayed: RunRecord
    stats: Stats
    about: dict[str, Any]


async def replay(
    spider: type[Spider],
    folder: str | Path,
    *,
    args: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Replayed:
    """Run ``spider`` on the recording in ``folder`` and compare.

    Args:
        spider: the spider class (its code as it is now).
        folder: a recording (``eclaw crawl --record``, or :class:`~eclaw.devloop.record.Recorder`).
        args: spider arguments; default: the recorded run's (its secret ones were not kept: give
            them all here, ``-a`` on the command line).
        settings: base settings (default: defaults).
        overrides: settings that win over the spider's (the replay's own come last).
    """
    folder = Path(folder)
    recorded, about = RunRecord.load(folder)
    capture = Capture()
    engine = Engine(
        settings,
        overrides={**dict(overrides or {}), **REPLAY_SETTINGS},
        middlewares=[*defaults(), HttpCache(folder, offline=True)],
    )
    capture.attach(engine)
    async with engine:
        stats = await engine.crawl(spider, **(_recorded_args(about) if args is None else dict(args)))
    replayed = capture.finish()
    return Replayed(compare(recorded, replayed), recorded, replayed, stats, about)


def _recorded_args(about: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded run's arguments; a secret one was written as ``***`` and cannot be replayed."""
    recorded = dict(about.get("args", {}))
    masked = sorted(name for name, value in recorded.items() if value == MASK)
    if masked:
        flags = " ".join(f"-a {name}=..." for name in masked)
        raise ConfigError(f"the recording does not keep secret arguments: give them all again ({flags})")
    return recorded
