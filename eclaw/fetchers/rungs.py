"""Which rung of the escalation ladder each host is on.

A host starts on its base rung (the fetcher the ``fetchers`` setting or the spider
gives it, else the ladder's first). A ban moves it one rung up; after ``quiet``
seconds without a ban it drifts one rung down, and if it is banned again there its
quiet period doubles (up to a day), so a host that needs the browser does not flap.
Only hosts that were banned are kept (until they have been quiet on their base rung
for a quiet period): a crawl of a million hosts that never escalate holds nothing here.

An empty page (no items where the spider expects some) is a page's signal, not the
host's: the page alone is fetched again one rung up. The host follows only once
most of its pages come empty — ``EMPTY_PAGES`` empty pages on its rung, and at
least half of the pages it fetched there since the first of them — so a site
where one page in twenty needs the browser renders those pages only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from eclaw.exceptions import ConfigError

__all__ = ["Change", "HostRung", "Rungs", "parse_rungs"]

MAX_QUIET = 86_400.0
EMPTY_PAGES = 3  # empty pages on a host's rung before the host itself moves up
EMPTY_WINDOW = 40  # pages after which a host's count of empty pages starts again


@dataclass
class HostRung:
    """A host off its base rung: where it is, since when (wall clock, shared by workers), how long it
    must stay quiet to come one rung down, and whether it came down since its last escalation."""

    rung: int
    since: float
    quiet: float
    drifted: bool = False


@dataclass(frozen=True)
class Change:
    """A host moved from one fetcher to another, and why."""

    host: str
    previous: str
    fetcher: str
    reason: str


def parse_rungs(text: str, known: Sequence[str]) -> tuple[str, ...]:
    """The ``ladder`` setting (``"plain,impersonate,browser"``) as fetcher names, checked.

    Raises:
        ConfigError: fewer than two rungs, an unknown fetcher, or one given twice.
    """
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if len(names) < 2:
        raise ConfigError(f"setting 'ladder': give two fetchers or more, lowest first (got {text!r})")
    for name in names:
        if name not in known:
            raise ConfigError(f"setting 'ladder': no fetcher {name!r} (known: {', '.join(sorted(known))})")
    if len(set(names)) != len(names):
        raise ConfigError(f"setting 'ladder': a fetcher is given twice in {text!r}")
    return names


class Rungs:
    """The rung of each host, moved up by bans and down by quiet periods.

    Args:
        names: the fetchers, lowest rung first.
        quiet: seconds without a ban before a host drifts one rung down.
        base: a host's base rung (its index in ``names``).
        clock: wall-clock seconds (workers of a cluster compare them).
    """

    def __init__(
        self,
        names: Sequence[str],
        quiet: float,
        base: Callable[[str], int],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.names = tuple(names)
        self.quiet = quiet
        self._base = base
        self._clock = clock
        self._hosts: dict[str, HostRung] = {}
        self._trials: dict[str, list[int]] = {}  # host -> [rung, pages, empty pages]: hosts with empty pages
        self.dirty: set[str] = set()  # hosts changed here since the last sync with other workers

    def __len__(self) -> int:
        return len(self._hosts)

    def current(self, host: str) -> tuple[int, Change | None]:
        """The rung of ``host`` now (one lower if it has been quiet long enough: that change too)."""
        state = self._hosts.get(host)
        if state is None:
            return self._base(host), None
        now = self._clock()
        if now - state.since < state.quiet:
            return state.rung, None
        self.dirty.add(host)
        base = self._base(host)
        if state.rung <= base:  # quiet on its base rung again: forgotten
            del self._hosts[host]
            return base, None
        previous = state.rung
        state.rung, state.since, state.drifted = previous - 1, now, True
        change = Change(host, self.names[previous], self.names[previous - 1], f"quiet for {state.quiet:.0f} s")
        return previous - 1, change

    def escalate(self, host: str, used: int, reason: str) -> tuple[int, Change | None]:
        """A request fetched with rung ``used`` was banned: the rung to try next (``used`` itself when
        there is none higher), and the change if this moved ``host`` (others may have moved it already)."""
        rung, _ = self.current(host)
        if rung > used:
            return rung, None
        if used + 1 >= len(self.names):
            return used, None
        now = self._clock()
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = HostRung(used + 1, now, self.quiet)
        else:
            if state.drifted:  # banned again on the rung it came down to: stay up longer next time
                state.quiet = min(state.quiet * 2, MAX_QUIET)
            state.rung, state.since, state.drifted = used + 1, now, False
        self.dirty.add(host)
        return used + 1, Change(host, self.names[used], self.names[used + 1], reason)

    def fetched(self, host: str, rung: int) -> None:
        """A page of ``host`` is being fetched on ``rung`` (counted only for hosts with empty pages)."""
        trial = self._trials.get(host)
        if trial is not None and trial[0] == rung:
            trial[1] += 1
            if trial[1] >= EMPTY_WINDOW:  # a few empty pages among many: the page's business, not the host's
                del self._trials[host]

    def empty(self, host: str, used: int) -> Change | None:
        """A page of ``host`` fetched with rung ``used`` came empty (it is fetched again a rung up):
        the change if this moved the host too (most of its pages there come empty)."""
        rung, _ = self.current(host)
        if used != rung:  # fetched above the host's rung already, or the host moved since
            return None
        trial = self._trials.get(host)
        if trial is None or trial[0] != rung:
            trial = self._trials[host] = [rung, 1, 0]
        trial[2] += 1
        if trial[2] < EMPTY_PAGES or trial[2] * 2 < trial[1]:
            return None
        del self._trials[host]
        pages = max(trial[1], trial[2])  # pages fetched before the first empty one came back are not counted
        return self.escalate(host, used, f"no items on {trial[2]} of {pages} pages")[1]

    def banned_again(self, host: str) -> None:
        """A ban on the host's current rung (nowhere higher to go): its quiet period starts again."""
        state = self._hosts.get(host)
        if state is not None:
            state.since = self._clock()
            self.dirty.add(host)

    # -- saved with --state, shared through Redis ---------------------------------------

    def items(self) -> Iterator[tuple[str, HostRung]]:
        return iter(self._hosts.items())

    def get(self, host: str) -> HostRung | None:
        return self._hosts.get(host)

    def dump(self) -> dict[str, dict[str, Any]]:
        return {host: asdict(state) | {"fetcher": self.names[state.rung]} for host, state in self._hosts.items()}

    def load(self, saved: Mapping[str, Mapping[str, Any]], *, newer_only: bool = False) -> None:
        """Take hosts' rungs from ``saved`` (a ``dump``); with ``newer_only``, only where they changed
        later than here (another worker's view)."""
        for host, fields in saved.items():
            fetcher = fields.get("fetcher")
            if fetcher not in self.names:
                continue  # a ladder of other fetchers: not ours to follow
            mine = self._hosts.get(host)
            if newer_only and mine is not None and mine.since >= float(fields["since"]):
                continue
            rung = self.names.index(str(fetcher))
            self._hosts[host] = HostRung(rung, float(fields["since"]), float(fields["quiet"]), bool(fields["drifted"]))
