from __future__ import annotations

import asyncio
import contextlib
import csv
import fcntl
import itertools
import json
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eclaw.stats import Stats
from eclaw.testing import demo_site
from tests.wheelhouse import build_eclaw


@pytest.fixture
async def demo_url() -> AsyncIterator[str]:
    async with demo_site() as base_url:
        yield base_url


@pytest.fixture(scope="session")
def eclaw_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """eclaw's wheel, built once for the whole run: the first xdist worker to ask builds it (under a lock,
    in the run's temporary folder that all workers share), the others take it."""
    run = tmp_path_factory.getbasetemp()
    shared = run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run
    folder = shared / "eclaw-wheel"
    with (shared / "eclaw-wheel.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        built = sorted(folder.glob("eclaw-*.whl"))
        if built:
            return built[0]
        folder.mkdir(exist_ok=True)
        return build_eclaw(folder)


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path, monkeypatch):
    """Crawls write dead-letter files to the working directory: keep it per test."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _no_crawl_left_behind() -> Iterator[None]:
    """A test that fails (or times out) while an ``eclaw`` process it started still runs would leave
    it running, and busy, for the rest of the suite: after each test, such processes and what they
    started are killed."""
    yield
    for pid in _eclaw_processes_left():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _eclaw_processes_left() -> list[int]:
    """This process's ``python -m eclaw ...`` children and all their descendants (Linux's /proc); not
    ``eclaw serve``, which a module's fixture starts and stops, with the jobs it runs."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], []
    for child in children.get(os.getpid(), []):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            if argv[1:3] == [b"-m", b"eclaw"] and argv[3:4] != [b"serve"]:  # a service outlives a test: its fixture's
                todo.append(child)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


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


async def until(condition: Callable[[], bool], deadline: float = 30.0, every: float = 0.01) -> None:
    """Wait until ``condition()`` holds, polling every ``every`` seconds; fail after ``deadline`` seconds (a
    generous bound: it only bounds a failure, a loaded machine must never reach it)."""
    async with asyncio.timeout(deadline):
        while not condition():  # noqa: ASYNC110  # a condition of plain state: no event to wait on
            await asyncio.sleep(every)


def gaps(times: list[float]) -> list[float]:
    """Differences between successive times."""
    return [b - a for a, b in itertools.pairwise(times)]


def assert_spaced(times: list[float], delay: float, stall: float = 0.5) -> None:
    """Requests arrived at a server at ``times`` (sorted), sent ``delay`` seconds apart (20 ms slack a gap).

    A stall (the sender's loop between its turn and its send, or the server's loop between an arrival
    and its logging) only ever makes an arrival *later*, never earlier: a late arrival lengthens the gap
    before it and shortens the one after it, and two stalled in a row (the second less late than the
    first) shorten two gaps in a row. So the times pass if sends ``delay`` apart, each arriving at most
    ``stall`` seconds late, explain them (the earliest each could have been sent, from the first on), and
    if few gaps are short of the delay (a quarter, at least one): a stall is rare, a politeness bug (a
    delay held per worker, or counted from the wrong moment) shortens every other gap, and its deficit
    grows past any stall."""
    spaces = gaps(times)
    shown = [round(g, 3) for g in spaces]
    earliest = times[0] - stall  # the first may have been sent up to a stall before it arrived
    for i, arrival in enumerate(times[1:], 1):
        earliest = max(arrival - stall, earliest + delay - 0.02)  # sent no sooner than a delay after the one before
        assert earliest <= arrival, (shown, f"arrival {i} came {earliest - arrival:.3f} s before any spacing allows")
    short = [i for i, g in enumerate(spaces) if g < delay - 0.02]
    assert spaces and len(short) <= max(1, len(spaces) // 4), (shown, short)


def assert_spaced_as_sent(sent: dict[str, float], arrived: dict[str, float], delay: float) -> None:
    """Requests left eclaw (``sent``: path -> the moment eclaw let it go, taken inside the crawl) ``delay``
    seconds apart, and a server saw them (``arrived``: path -> its arrival, on the same clock) in that order.

    The spacing is checked where eclaw decides it (:func:`assert_spaced` on ``sent``): a stall between a
    send and its arrival (the one process's loop serving both) cannot shorten a gap there, as it can at the
    server, where a late *first* arrival leaves no longer gap before it for :func:`assert_spaced` to see.
    At the server: each request arrived once, after its send and in the order sent, and few gaps are short
    of the delay (a quarter, at least one): a delay held per worker, or counted from the wrong moment,
    shortens them all."""
    assert sorted(arrived) == sorted(sent), (sorted(arrived), sorted(sent))
    order = sorted(sent, key=sent.__getitem__)
    assert sorted(arrived, key=arrived.__getitem__) == order, (arrived, sent)
    assert all(arrived[path] >= sent[path] for path in order), (arrived, sent)
    assert_spaced([sent[path] for path in order], delay)
    at_server = gaps([arrived[path] for path in order])
    short = [round(g, 3) for g in at_server if g < delay - 0.02]
    assert len(short) <= max(1, len(at_server) // 4), ([round(g, 3) for g in at_server], short)


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


@pytest.fixture(scope="module")
def chromium() -> None:
    """No Chromium is a failure, never a skip: ``make test`` installs it (``usefixtures("chromium")``)."""
    from eclaw.exceptions import ConfigError
    from eclaw.fetchers.browser import find_chromium

    try:
        find_chromium("")
    except ConfigError as exc:
        pytest.fail(f"{exc} (make test installs it)")


@contextlib.asynccontextmanager
async def headless_chromium() -> AsyncIterator[Any]:
    """A headless Chromium (the system's, driven by Playwright) for tests that look at a page."""
    from playwright.async_api import async_playwright

    from eclaw.fetchers.browser import find_chromium
    from eclaw.fetchers.browser.fetcher import CHROMIUM_FLAGS

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=find_chromium(""),
            headless=True,
            args=list(CHROMIUM_FLAGS),
            chromium_sandbox=os.geteuid() != 0,  # Chromium's sandbox refuses root
        )
        try:
            yield browser
        finally:
            await browser.close()
