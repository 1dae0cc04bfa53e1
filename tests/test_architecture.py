"""docs/architecture.md's "A page's path" is how a default crawl runs, measured on a crawl of the demo
shop: each event's publishers and owner are those of its row in the table, the files the section
names are the files a page calls into (with a profiler), no more, no fewer, and its list of a
request's walk is the files a request is handed to."""

from __future__ import annotations

import inspect
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from types import FrameType
from typing import Any

import eclaw
from eclaw import Engine
from eclaw.demo.shop import ShopSpider
from eclaw.events import Event
from eclaw.http import Request, Response
from eclaw.testing import collect

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(eclaw.__file__).parent
MIDDLEWARES = ROOT / "middlewares"
SECTION = re.search(r"^## A page's path\n(.*?)^## ", (ROOT / "docs/architecture.md").read_text(), re.S | re.M)
# how the table's second column names each publisher
PUBLISHERS = {
    "core/callbacks.py": "the callback runner",
    "core/start.py": "the start feeder",
    "core/fetch.py": "the fetch runner",
    "core/accounting.py": "the intake",
    "core/pipeline.py": "the pipeline runner",
}
# named in the section for the crawls that have them, not a default one
CONDITIONAL = {"core/lending.py": "--processes", "core/state.py": "--state", "storage/files.py": "an output file"}
HARNESS = ("demo/", "testing.py")  # the demo shop, its spider and the test's memory output: not the crawl's


def _section() -> str:
    assert SECTION is not None, "docs/architecture.md has no section 'A page's path'"
    return SECTION.group(1)


def _rows() -> dict[str, tuple[str, str, str]]:
    """Each event the table names -> its row's (published by, owner, file)."""
    rows = {}
    for line in _section().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            for kind in re.findall(r"`(\w+)`", cells[0]):
                rows[kind] = (cells[1], cells[2], cells[3].strip("`"))
    return rows


def _place(filename: str) -> str | None:
    """``filename`` as the section names it (``core/fetch.py``, ``middlewares/retry.py``), if it is eclaw's."""
    path = Path(filename)
    for root, prefix in ((PACKAGE, ""), (MIDDLEWARES, "middlewares/")):
        if path.is_relative_to(root):
            return prefix + path.relative_to(root).as_posix()
    return None


def _publisher(frame: FrameType | None) -> str:
    """The first of eclaw's files up the stack from a subscriber that is not the bus: who published."""
    while frame is not None:
        place = _place(frame.f_code.co_filename)
        if place is not None and place != "core/bus.py":
            return place
        frame = frame.f_back
    return "?"


def _carries(value: object) -> bool:
    """``value`` is a request or a response, a batch of them, or an event (a dataclass) that carries one."""
    if isinstance(value, Request | Response):
        return True
    if type(value) in (list, tuple) and value and isinstance(value[0], Request | Response):  # not a subclass's []
        return True
    fields = getattr(type(value), "__dataclass_fields__", None)
    return bool(fields) and not fields.keys().isdisjoint(("request", "response", "requests"))


def _handed(frame: FrameType) -> bool:
    """The function of ``frame`` was handed a request (as ``self`` too: its own methods)."""
    code = frame.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    arguments = frame.f_locals
    return any(_carries(arguments.get(name)) for name in names)


async def _published(demo_url: str) -> tuple[dict[str, set[str]], Any]:
    """Who published each kind of event in a crawl of the demo shop, and the crawl."""
    engine = Engine()
    published: dict[str, set[str]] = defaultdict(set)
    crawls: list[Any] = []

    def seen(event: Event) -> None:
        published[type(event).__name__].add(_publisher(sys._getframe(1)))
        if not crawls:
            crawls.append(event.crawl)

    engine.subscribe(Event, seen)
    await collect(ShopSpider, engine=engine, base_url=demo_url)
    return published, crawls[0]


async def _profiled(demo_url: str) -> tuple[Counter[str], Counter[str], int]:
    """A default crawl of the demo shop (no subscriber): the calls into each file, the calls that
    were handed a request, and the pages."""
    calls: Counter[str] = Counter()
    handed: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            filename = frame.f_code.co_filename
            calls[filename] += 1
            if _handed(frame):
                handed[filename] += 1

    sys.setprofile(profile)
    try:
        _, stats = await collect(ShopSpider, base_url=demo_url)
    finally:
        sys.setprofile(None)
    return _ours(calls), _ours(handed), stats.responses_downloaded


def _ours(calls: Counter[str]) -> Counter[str]:
    """The counts of eclaw's files (the harness aside), by the name the section gives them."""
    files: Counter[str] = Counter()
    for filename, count in calls.items():
        place = _place(filename)
        if place is not None and not place.startswith(HARNESS):
            files[place] += count
    return files


async def test_the_page_path_in_the_architecture_page_is_how_a_crawl_runs(demo_url: str) -> None:
    published, crawl = await _published(demo_url)
    files, handed, pages = await _profiled(demo_url)
    rows = _rows()
    for kind in ("RequestGenerated", "RequestScheduled", "ResponseDownloaded", "ItemParsed", "ResponseParsed"):
        assert kind in published, f"a crawl of the demo shop published no {kind}"
    for kind, publishers in published.items():
        if kind not in rows:
            continue  # a notification (CrawlStarted...): no owner, not on a page's path
        named = rows[kind][0]
        for place in publishers:
            assert PUBLISHERS.get(place, place) in named, f"{kind} is published by {place}, not named in its row"
    for kind, (_, owner_cell, file_cell) in rows.items():
        owner = _owner(crawl, kind)
        assert owner.__qualname__.split(".")[0] in owner_cell, f"{kind} is owned by {owner.__qualname__}"
        if "." in owner_cell:
            assert f"`{owner.__qualname__}`" == owner_cell, f"{kind} is owned by {owner.__qualname__}"
        assert _place(inspect.getfile(owner)) == file_cell, f"{kind}'s owner is in {inspect.getfile(owner)}"

    named = {name for name in re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", _section()) if not name.startswith("tests/")}
    on_path = {place for place, count in files.items() if count >= pages / 2}  # start-up and end aside
    assert not on_path - named, f"files a page calls into that the section does not name: {sorted(on_path - named)}"
    unused = named - set(files) - CONDITIONAL.keys()
    assert not unused, f"files the section names that a default crawl never calls: {sorted(unused)}"

    walk = re.search(r"\*\*A request's walk\*\*(.*?) \((\d+) files\)", _section(), re.S)
    assert walk is not None, "the section lists no request's walk"
    listed = re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", walk.group(1))
    walked = {place for place, count in handed.items() if count >= pages / 2}
    assert set(listed) == walked, f"a request is handed to {sorted(walked)}, the section lists {sorted(listed)}"
    assert int(walk.group(2)) == len(listed), "the walk's count is not its list's length"


def _owner(crawl: Any, kind: str) -> Any:
    bus = crawl.bus
    for event, owner in bus._owners.items():
        if event.__name__ == kind:
            return owner
    for event, batched in bus._batched.items():
        if event.__name__ == kind:
            return batched.owner
    raise AssertionError(f"{kind} has no owner in a default crawl")
