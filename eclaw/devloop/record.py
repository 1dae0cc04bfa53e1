"""Record a crawl (``eclaw crawl --record DIR``) so that ``eclaw replay`` can run the spider again
offline and say what changed.

A recording folder holds:

- ``http-cache.sqlite``: every response, in the :class:`~eclaw.middlewares.HttpCache` format
  (keyed by request fingerprint; error statuses the spider handles included);
- ``items.jsonl``: each item a callback yielded (before the pipelines), with the page it
  came from, its type and its key;
- ``requests.jsonl``: each request a page yielded (method, URL), duplicates included;
- ``recording.json``: the spider, its arguments, the stats, the quality profile and the
  failures by reason.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eclaw.contracts import Middleware
from eclaw.engine import Engine
from eclaw.events import ItemParsed, RequestFailed, RequestGenerated, ResponseParsed
from eclaw.exceptions import ConfigError
from eclaw.items import item_key, item_to_dict, item_type
from eclaw.middlewares import HttpCache, defaults
from eclaw.observe.quality import Profile
from eclaw.security.redact import Redactor
from eclaw.settings import Settings
from eclaw.spider import Spider
from eclaw.stats import Stats
from eclaw.storage.paths import resolve_path

__all__ = ["Capture", "Recorder", "RunRecord", "recorder_for"]

START = "(start requests)"
ERRBACK = "(errback)"


@dataclasses.dataclass
class RunRecord:
    """What one run of a spider produced, page by page: what a replay is compared with."""

    items: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # page, type, key, item
    requests: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # page, method, url
    profile: dict[str, Any] = dataclasses.field(default_factory=dict)
    failures: dict[str, int] = dataclasses.field(default_factory=dict)  # final failures by reason
    pages: int = 0

    def save(self, folder: Path, about: Mapping[str, Any], redactor: Redactor | None = None) -> None:
        """Write the run next to its responses (``about``: the spider, its arguments, the stats),
        everything through ``redactor`` (secret arguments masked by the caller)."""
        clean = (redactor or Redactor()).record
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "items.jsonl").open("w", encoding="utf-8") as out:
            for row in self.items:
                out.write(json.dumps(clean(row), ensure_ascii=False, default=str) + "\n")
        with (folder / "requests.jsonl").open("w", encoding="utf-8") as out:
            for page, method, url in self.requests:
                out.write(json.dumps(clean({"page": page, "method": method, "url": url})) + "\n")
        summary = {**about, "profile": self.profile, "failures": self.failures, "pages": self.pages}
        text = json.dumps(clean(summary), indent=2, default=str)
        (folder / "recording.json").write_text(text, encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> tuple[RunRecord, dict[str, Any]]:
        """The run recorded in ``folder``, and what ``save`` wrote about it."""
        try:
            about = json.loads((folder / "recording.json").read_text(encoding="utf-8"))
            items = [json.loads(line) for line in (folder / "items.jsonl").read_text(encoding="utf-8").splitlines()]
            links = [json.loads(line) for line in (folder / "requests.jsonl").read_text(encoding="utf-8").splitlines()]
        except FileNotFoundError as exc:
            missing = Path(str(exc.filename)).name
            raise ConfigError(f"{folder} is not a recording (no {missing}): crawl --record it first") from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the recording in {folder}: {exc}") from None
        record = cls(
            items=items,
            requests=[(row["page"], row["method"], row["url"]) for row in links],
            profile=about.get("profile", {}),
            failures=about.get("failures", {}),
            pages=about.get("pages", 0),
        )
        return record, about


class Capture:
    """Subscribes to a crawl's events and keeps its :class:`RunRecord`: the items and requests
    of each page, the quality profile, the failures. Only a recorded or replayed crawl pays for it."""

    def __init__(self) -> None:
        self.record = RunRecord()
        self._profile: Profile | None = None
        self._keyless: Counter[tuple[str, str]] = Counter()

    def attach(self, engine: Engine) -> None:
        engine.subscribe(ItemParsed, self._item)
        engine.subscribe(RequestGenerated, self._request)
        engine.subscribe(ResponseParsed, self._parsed)
        engine.subscribe(RequestFailed, self._failed)

    def finish(self) -> RunRecord:
        self.record.profile = self._profile.as_dict() if self._profile is not None else {}
        return self.record

    def _item(self, event: ItemParsed) -> None:
        spider = event.crawl.spider if event.crawl is not None else None
        if self._profile is None:
            self._profile = Profile(tuple(spider.required_fields) if spider is not None else ())
        self._profile.observe(event.item)
        data = json.loads(json.dumps(item_to_dict(event.item), default=str))  # as a recording reads it back
        kind, page = item_type(event.item), event.response.url if event.response is not None else ERRBACK
        try:
            key = item_key(event.item, data, tuple(spider.item_key) if spider is not None else ())
        except ValueError:  # an empty key field: identified like a key-less item
            key = None
        if key is None:
            self._keyless[page, kind] += 1
            identity = f"{kind} #{self._keyless[page, kind]} of {page}"
        else:
            identity = f"{kind}[{key.replace(chr(31), ', ')}]"
        self.record.items.append({"page": page, "type": kind, "id": identity, "item": data})

    def _request(self, event: RequestGenerated) -> None:
        page = event.parent.url if event.parent is not None else START
        self.record.requests.append((page, event.request.method, event.request.url))

    def _parsed(self, event: ResponseParsed) -> None:
        self.record.pages += 1

    def _failed(self, event: RequestFailed) -> None:
        if event.final:
            self.record.failures[event.reason] = self.record.failures.get(event.reason, 0) + 1


class Recorder:
    """Records a crawl in ``folder``: its responses (an :class:`HttpCache` in the crawl's
    middlewares, after the defaults) and what its callbacks yielded (a :class:`Capture`)::

        recorder = Recorder("recordings/books")
        engine = Engine(Settings(store=""), middlewares=recorder.middlewares())
        recorder.attach(engine)
        async with engine:
            stats = await engine.crawl(Books)
        recorder.save(Books.name, stats)
    """

    def __init__(self, folder: str | Path, redactor: Redactor | None = None) -> None:
        self.folder = Path(folder)
        self.capture = Capture()
        self.redactor = redactor or Redactor()  # what the folder's records pass through

    def middlewares(self) -> list[Middleware]:
        """The default middlewares, then a cache that keeps every response (handled error statuses too)."""
        return [*defaults(), HttpCache(self.folder, ignore_statuses=())]

    def attach(self, engine: Engine) -> None:
        self.capture.attach(engine)

    def save(self, spider: str, stats: Stats, *, args: Mapping[str, Any] | None = None, spider_file: str = "") -> None:
        about = {
            "spider": spider,
            "spider_file": spider_file,
            "args": self.redactor.args(args or {}),
            "recorded_at": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
            "stats": stats.as_dict(),
        }
        self.capture.finish().save(self.folder, about, self.redactor)


def recorder_for(
    folder: str | None,
    spider: type[Spider],
    base: Settings,
    overrides: Mapping[str, Any],
    redactor: Redactor | None = None,
) -> Recorder | None:
    """``--record DIR`` of a crawl (``{spider}`` and ``{run_key}`` filled in); it needs the whole crawl in one run.
    What it writes passes ``redactor`` (the command line's: it knows the secret arguments)."""
    if not folder:
        return None
    try:
        settings = base.replace(spider.custom_settings).replace(dict(overrides))
    except ConfigError as exc:
        raise ConfigError(f"spider {spider.name!r}: {exc}") from None
    if settings.state_dir or settings.frontier_url:
        raise ConfigError("--record needs the whole crawl in one process: not with --state or --redis")
    if settings.http_cache or settings.incremental:  # pages it answers would never reach the recording
        raise ConfigError("--record keeps every response itself: not with http_cache or incremental")
    return Recorder(resolve_path(folder, spider.name, settings.run_key), redactor)
