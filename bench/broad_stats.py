"""What the broad-crawl benchmark measures, from the site's request log (the same for every contender).

* **Pages in the window**: 200 responses to requests that reached the server within ``seconds``
  of the run's first request.
* **The politeness bound**: the pages an ideal crawler gets in the same window. It starts every host
  at once and then every ``period`` seconds, where ``period = max(delay, latency)``: both
  contenders count the delay from the start of the previous request and keep one connection per
  host, so a host whose latency is under the delay is fetched every ``delay`` seconds. A host runs
  out when its pages do; a page of a 429 host costs two requests. (``hosts / (delay + latency)``,
  the loose form, is kept beside it.)
* **The longest a ready host waited**: for each host and each gap between two of its requests, the
  host is *ready* at ``R = max(previous start + delay, previous end, A)`` where ``A`` is the earliest
  moment one of its pages not yet asked for was known to the crawler (a page is known once a page
  linking to it was sent, a seed from the first request of the run, a page answered 429 again
  ``Retry-After`` seconds after that answer). The wait is the time from ``R`` to the next request
  (or to the end of the window, if none came): a frontier that starves a host shows it here.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from bench.broad_site import RETRY_AFTER, Host, Site

INF = math.inf


@dataclass(frozen=True, slots=True)
class Record:
    arrived: float
    ended: float
    host: int
    page: int
    status: int


def read_log(path: Path) -> tuple[list[Record], dict[str, float]]:
    """The records of a site log, by arrival, and the server's loop lag."""
    records = []
    lag: dict[str, float] = {}
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            lag = {k: float(v) for k, v in (part.split("=") for part in line[1:].split())}
            continue
        a, e, h, p, s = line.split()
        records.append(Record(float(a), float(e), int(h), int(p), int(s)))
    records.sort(key=lambda r: r.arrived)
    return records, lag


def ideal_pages(hosts: list[Host], delay: float, seconds: float, *, loose: bool = False) -> float:
    """Pages an ideal polite crawler fetches in ``seconds`` (see the module docstring)."""
    total = 0
    for host in hosts:
        if not host.healthy:
            continue
        period = delay + host.latency if loose else max(delay, host.latency)
        requests = math.ceil(seconds / period) if period > 0 else host.pages * 2  # at 0, p, 2p ... before the end
        total += min(host.pages, requests // 2 if host.fault == "429" else requests)
    return total


def known_times(site: Site, records: list[Record], start: float, end: float) -> dict[tuple[int, int], float]:
    """When the crawler could first know each page: the end of the first answer linking to it."""
    known = dict.fromkeys(site.seed_pages(), start)
    for record in sorted((r for r in records if r.status == 200 and r.ended <= end), key=lambda r: r.ended):
        for target in site.links(record.host, record.page):
            if target not in known:
                known[target] = record.ended
    return known


def waits(site: Site, records: list[Record], delay: float, start: float, end: float) -> dict[str, float]:
    """The waits of ready hosts (seconds): the longest, its host, the 99th percentile and the median."""
    known = known_times(site, records, start, end)
    by_host: dict[int, list[Record]] = defaultdict(list)
    for record in records:
        if record.arrived <= end:
            by_host[record.host].append(record)
    needs: dict[int, list[tuple[float, float]]] = defaultdict(list)  # host -> (available, consumed)
    first_ask: dict[tuple[int, int], float] = {}
    for host, rows in by_host.items():
        asks: dict[int, list[Record]] = defaultdict(list)
        for r in rows:
            asks[r.page].append(r)
        for page, tries in asks.items():
            first_ask[host, page] = tries[0].arrived
            for n, r in enumerate(tries):
                if r.status == 429:  # the page is pending again once its Retry-After is over
                    again = tries[n + 1].arrived if n + 1 < len(tries) else INF
                    needs[host].append((r.ended + RETRY_AFTER, again))
    for page, at in known.items():
        if at <= end and site.hosts[page[0]].healthy:
            needs[page[0]].append((at, first_ask.get(page, INF)))
    gaps: list[float] = []
    worst = (0.0, -1)
    for host, wanted in needs.items():
        for wait in _host_waits(wanted, by_host.get(host, []), delay, end):
            gaps.append(wait)
            worst = max(worst, (wait, host))
    gaps.sort()
    return {
        "max_s": worst[0],
        "max_host": worst[1],
        "p99_s": gaps[int(0.99 * (len(gaps) - 1))] if gaps else 0.0,
        "median_s": statistics.median(gaps) if gaps else 0.0,
        "gaps": len(gaps),
        "over_1s": sum(g > 1 for g in gaps),
    }


def _host_waits(wanted: list[tuple[float, float]], rows: list[Record], delay: float, end: float) -> list[float]:
    """The wait of each gap of one host: before its first request, between two, after its last."""
    wanted.sort(key=lambda n: n[1])
    consumed = [c for _, c in wanted]
    suffix = [INF] * (len(wanted) + 1)  # earliest availability among needs consumed after a moment
    for i in range(len(wanted) - 1, -1, -1):
        suffix[i] = min(suffix[i + 1], wanted[i][0])
    result = []
    ready = suffix[0]
    for i in range(len(rows) + 1):
        following = rows[i].arrived if i < len(rows) else end
        if i > 0:
            previous = rows[i - 1]
            pending = suffix[bisect.bisect_right(consumed, previous.arrived)]
            ready = max(previous.arrived + delay, previous.ended, pending)
        if ready < following:
            result.append(following - ready)
        elif i < len(rows):
            result.append(0.0)
    return result


def politeness(records: list[Record], hosts: list[Host], delay: float, start: float, end: float) -> dict[str, float]:
    """Gaps between two requests to one healthy host shorter than the delay (10 ms of slack), in
    the window; and the same count on failing hosts, where a retry may come from the HTTP client."""
    last: dict[int, float] = {}
    shortest, short, faulty = INF, 0, 0
    for r in records:
        if not start <= r.arrived <= end:
            continue
        if r.host in last:
            gap = r.arrived - last[r.host]
            if hosts[r.host].healthy:
                shortest = min(shortest, gap)
                short += gap < delay - 0.01
            else:
                faulty += gap < delay - 0.01
        last[r.host] = r.arrived
    return {"min_gap_s": shortest if shortest < INF else 0.0, "gaps_under_delay": short, "failing_hosts": faulty}


def window(records: list[Record], seconds: float) -> tuple[float, float]:
    """(start, end): from the first request, ``seconds`` long or up to the last answer if sooner."""
    start = records[0].arrived
    last = max(r.ended for r in records)
    return start, min(start + seconds, last)


def pages_between(records: list[Record], start: float, end: float) -> int:
    return sum(1 for r in records if r.status == 200 and start <= r.arrived <= end)
