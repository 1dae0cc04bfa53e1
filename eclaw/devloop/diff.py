"""What changed between a recorded run and its replay: items added, removed and changed (by key),
requests added and removed (by the page that yielded them), the quality profile, the spider's failures.

Items are matched by identity: ``Type[key]`` for an item with a key (the item class's
``key``, or the spider's ``item_key`` for dicts); a key-less item is ``Type #n of PAGE``,
the n-th of its type its page yielded, so that a changed field shows as a change, not
as one item removed and another added. When several items share an identity (a product
listed on two pages), the second is ``Type[key] (2)``, and so on, in page order.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import Any

from eclaw.devloop.record import RunRecord

__all__ = ["Diff", "compare"]

SHOWN = 20  # lines per section before "... and N more"
_SPIDER_FAILURES = ("callback error", "no items")  # what the spider's code decides; download failures are not


@dataclasses.dataclass
class Diff:
    """The differences; :attr:`empty` when the replay did what the recording did."""

    added: list[tuple[str, dict[str, Any]]] = dataclasses.field(default_factory=list)
    removed: list[tuple[str, dict[str, Any]]] = dataclasses.field(default_factory=list)
    changed: list[tuple[str, list[tuple[str, Any, Any]]]] = dataclasses.field(default_factory=list)
    requests_added: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    requests_removed: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    quality: list[str] = dataclasses.field(default_factory=list)
    failures: list[str] = dataclasses.field(default_factory=list)
    same: int = 0  # items identical in both

    @property
    def empty(self) -> bool:
        return not (
            self.added or self.removed or self.changed or self.requests_added or self.requests_removed
            or self.quality or self.failures
        )  # fmt: skip

    def render(self) -> str:
        """The diff as a person reads it: ``+`` added, ``-`` removed, ``~`` changed."""
        lines: list[str] = []
        _section(lines, "items removed", (f"- {i}  {_value(d)}" for i, d in self.removed), len(self.removed))
        _section(lines, "items added", (f"+ {i}  {_value(d)}" for i, d in self.added), len(self.added))
        changed = (
            f"~ {identity}\n" + "\n".join(f"    {field}: {_value(a)} -> {_value(b)}" for field, a, b in fields)
            for identity, fields in self.changed
        )
        _section(lines, "items changed", changed, len(self.changed))
        added = (f"+ {method} {url}  (from {page})" for page, method, url in self.requests_added)
        _section(lines, "requests added", added, len(self.requests_added))
        removed = (f"- {method} {url}  (from {page})" for page, method, url in self.requests_removed)
        _section(lines, "requests removed", removed, len(self.requests_removed))
        _section(lines, "quality profile", (f"~ {line}" for line in self.quality), len(self.quality))
        _section(lines, "failures", (f"~ {line}" for line in self.failures), len(self.failures))
        return "\n".join(lines)


def compare(recorded: RunRecord, replayed: RunRecord) -> Diff:
    """The :class:`Diff` of ``replayed`` against ``recorded``."""
    diff = Diff()
    before, after = _by_identity(recorded.items), _by_identity(replayed.items)
    for identity in sorted(before.keys() - after.keys()):
        diff.removed.append((identity, before[identity]))
    for identity in sorted(after.keys() - before.keys()):
        diff.added.append((identity, after[identity]))
    for identity in sorted(before.keys() & after.keys()):
        fields = _fields(before[identity], after[identity])
        if fields:
            diff.changed.append((identity, fields))
        else:
            diff.same += 1
    old, new = Counter(recorded.requests), Counter(replayed.requests)
    diff.requests_removed = sorted((old - new).elements())
    diff.requests_added = sorted((new - old).elements())
    diff.quality = _profile(recorded.profile, replayed.profile)
    diff.failures = _failures(recorded.failures, replayed.failures)
    return diff


def _by_identity(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    seen: Counter[str] = Counter()
    for row in sorted(rows, key=lambda r: (r["id"], r["page"])):  # repeats numbered in page order
        identity = row["id"]
        seen[identity] += 1
        found[identity if seen[identity] == 1 else f"{identity} ({seen[identity]})"] = row["item"]
    return found


def _fields(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    missing = object()
    changed = []
    for field in sorted(before.keys() | after.keys()):
        a, b = before.get(field, missing), after.get(field, missing)
        if a != b:
            changed.append((field, "(absent)" if a is missing else a, "(absent)" if b is missing else b))
    return changed


def _profile(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    lines = []
    for kind in sorted(before.keys() | after.keys()):
        old, new = before.get(kind), after.get(kind)
        if old is None or new is None:
            lines.append(f"{kind}: {old['count'] if old else 0} -> {new['count'] if new else 0} items")
            continue
        if old["count"] != new["count"]:
            lines.append(f"{kind}: {old['count']} -> {new['count']} items")
        for field in sorted(old["null_rate"].keys() | new["null_rate"].keys()):
            a, b = old["null_rate"].get(field, 0), new["null_rate"].get(field, 0)
            if a != b:
                lines.append(f"{kind}: field {field!r} empty in {a:.0%} -> {b:.0%} of items")
        for field in sorted(old["types"].keys() | new["types"].keys()):
            a, b = old["types"].get(field), new["types"].get(field)
            if a != b:
                lines.append(f"{kind}: field {field!r} type {'/'.join(a or ['(none)'])} -> {'/'.join(b or ['(none)'])}")
    return lines


def _failures(before: dict[str, int], after: dict[str, int]) -> list[str]:
    """Changes in the failures the spider's code decides (a callback's error, a page without items)."""
    lines = []
    for reason in sorted(before.keys() | after.keys()):
        if reason.startswith(_SPIDER_FAILURES) and before.get(reason, 0) != after.get(reason, 0):
            lines.append(f"{reason}: {before.get(reason, 0)} -> {after.get(reason, 0)} pages")
    return lines


def _section(lines: list[str], title: str, entries: Iterable[str], count: int) -> None:
    if not count:
        return
    lines.append(f"{title} ({count}):")
    for shown, entry in enumerate(entries):
        if shown == SHOWN:
            lines.append(f"  ... and {count - SHOWN} more")
            break
        lines.append("  " + entry.replace("\n", "\n  "))


def _value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
