from __future__ import annotations

import csv
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from eclaw.stats import Stats
from eclaw.testing import demo_site


@pytest.fixture
async def demo_url() -> AsyncIterator[str]:
    async with demo_site() as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path, monkeypatch):
    """Crawls write dead-letter files to the working directory: keep it per test."""
    monkeypatch.chdir(tmp_path)


def assert_accounted(stats: Stats) -> None:
    """The accounting invariant: every generated request ended in one terminal state."""
    assert stats.requests_generated == (
        stats.requests_parsed + stats.requests_failed + stats.requests_dropped + stats.requests_pending
    ), stats.as_dict()
    assert stats.requests_failed == sum(stats.failed_by_reason.values())
    assert stats.requests_dropped == sum(stats.dropped_by_reason.values())
    assert stats.items_parsed == stats.items_stored + stats.items_dropped


def recorder(sink: list[Any]) -> Callable[[Any], Awaitable[None]]:
    """An event handler that appends every event it gets to ``sink``."""

    async def append(event: Any) -> None:
        sink.append(event)

    return append


def gaps(times: list[float]) -> list[float]:
    """Differences between successive times."""
    return [b - a for a, b in itertools.pairwise(times)]


def read_jsonl(path: str | Path) -> list[Any]:
    """The records of a JSON-lines file ([] if it does not exist)."""
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def read_csv(path: str | Path) -> list[dict[str, str]]:
    """The rows of a CSV file with a header."""
    with Path(path).open(newline="") as handle:
        return list(csv.DictReader(handle))


def record_file(spider: str, kind: str) -> Path:
    """The default file of record (``failures``, ``dead-letter``, ``drops``) of a spider, under the working dir."""
    return Path("eclaw-data") / spider / f"{kind}.jsonl"


def read_bytes(path: str | Path) -> bytes:
    return Path(path).read_bytes()
