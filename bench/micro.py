"""Micro-benchmarks of the hot paths (no network).

    python -m bench.micro

- event dispatch: cost per event published through a crawl's bus to one subscriber, and to its
  owner alone (how the crawl's own events go when nobody subscribed);
- fingerprint + dedupe: per URL, new and repeated, through the frontier; the Bloom filter alone, per
  new fingerprint, once it has grown a second stage;
- hand-out: per request through the frontier (enqueue, next_request, release) over 1,000 hosts,
  without a resolver and with ``dns_resolver=async``'s (every name known: the cost of asking it);
- broad enqueue: per link a page yields (20 new to its own host, 4 of its host seen before, 3 to
  other hosts) into a frontier whose window is full, as at 10,000 hosts (most go to disk);
- spill: per request written to the frontier's disk and read back (``SpillQueue.put``, ``take``), as
  a broad crawl spills them: a page's links a batch (20 to its own host, 3 to others), read back
  one request a host at a time, round the hosts (10,000 hosts, a window of one each);
- link extraction: ``response.follow_all(css="a")`` per bench page, and with a link rule
  (``follow_all(rule=...)``: extraction, resolving, filtering, de-duplication) per link kept.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from typing import Any

from bench.site import render
from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.discovery import Rule
from eclaw.events import Event
from eclaw.frontier.base import fingerprint
from eclaw.frontier.default import DefaultFrontier
from eclaw.frontier.dupefilter import BloomDupeFilter
from eclaw.frontier.spill import SpillQueue


@dataclass(frozen=True, slots=True, kw_only=True)
class Ping(Event):
    n: int


class Bench(Spider):
    name = "bench"
    allowed_domains = ["127.0.0.1"]


async def dispatch_cost(events: int = 100_000, *, owner: bool = False) -> float:
    """µs an event through a crawl's bus to one subscriber, or (``owner``) to its owner alone, which
    the bus hands it to straight."""
    engine = Engine()
    seen = 0

    async def handler(event: Ping) -> None:
        nonlocal seen
        seen += 1

    if not owner:
        engine.subscribe(Ping, handler)
    crawl = engine.prepare(Bench)
    if owner:
        crawl.bus.own(Ping, handler)
    publish = crawl.bus.publish
    started = time.perf_counter()
    for n in range(events):
        await publish(Ping(n=n))
    assert seen == events
    return (time.perf_counter() - started) / events * 1e6


def bloom_cost(fps: int = 200_000) -> float:
    """µs a new fingerprint added to a Bloom filter of two stages (sized for half of them)."""
    bloom = BloomDupeFilter(fps // 2, 1e-6)
    keys = [hashlib.sha1(n.to_bytes(8, "big")).digest() for n in range(fps)]
    started = time.perf_counter()
    added = sum(bloom.add(key) for key in keys)
    cost = (time.perf_counter() - started) / fps * 1e6
    assert added >= fps - 10
    return cost


async def dedupe_cost(urls: int = 50_000) -> tuple[float, float, float]:
    frontier = DefaultFrontier()
    await frontier.open(Bench(), Settings(), lambda: None)
    requests = [Request(f"http://127.0.0.1:8080/p/{n}.html?b=1&a={n % 7}") for n in range(urls)]
    started = time.perf_counter()
    for request in requests:
        fingerprint(request)
    fp_cost = (time.perf_counter() - started) / urls * 1e6
    batches = [requests[i : i + 30] for i in range(0, urls, 30)]
    started = time.perf_counter()
    for batch in batches:
        await frontier.enqueue(batch)
    new_cost = (time.perf_counter() - started) / urls * 1e6
    started = time.perf_counter()
    for batch in batches:
        await frontier.enqueue(batch)
    repeat_cost = (time.perf_counter() - started) / urls * 1e6
    return fp_cost, new_cost, repeat_cost


async def handout_cost(hosts: int = 1000, per_host: int = 20, *, names: bool = False) -> float:
    frontier = DefaultFrontier()
    await frontier.open(Spider(name="hosts"), Settings(concurrency=10_000, concurrency_per_domain=1), lambda: None)
    if names:
        from eclaw.fetchers.dns import CachingResolver

        resolver = CachingResolver(servers=["127.0.0.1:9"])
        resolver._cache.update({f"h{h}.micro.test": (time.monotonic() + 3600, ["127.0.0.2"]) for h in range(hosts)})
        frontier.resolve_with(resolver)
    requests = [Request(f"http://h{h}.micro.test/p/{n}") for n in range(per_host) for h in range(hosts)]
    started = time.perf_counter()
    await frontier.enqueue(requests)
    handed = 0
    while (request := await frontier.next_request()) is not None:
        await frontier.release(request)
        handed += 1
    cost = (time.perf_counter() - started) / len(requests) * 1e6
    assert handed == len(requests), f"{handed} of {len(requests)} handed out"
    await frontier.close()
    if names:
        await resolver.close()
    return cost


async def broad_enqueue_cost(hosts: int = 10_000, pages: int = 20_000) -> float:
    """µs a link: ``pages`` pages' links enqueued a page at a time (``DefaultFrontier.enqueue``: checks,
    dedupe, each host's queue, the disk past the 10,000-request window)."""
    frontier = DefaultFrontier()
    await frontier.open(Spider(name="broad"), Settings(frontier_memory=10_000, concurrency=1000), lambda: None)
    batches, new = [], set()
    for page in range(pages):
        host = f"h{page % hosts}.test"
        urls = [f"http://{host}/p/{page * 20 + n}" for n in range(1, 21)]
        urls += [f"http://{host}/p/{(page * 7 + n) % 500}" for n in range(4)]
        urls += [f"http://h{(page * 13 + n) % hosts}.test/p/{page % 300}" for n in range(3)]
        batch = []
        for url in urls:
            request = Request(url)
            request.depth, request.referer = 2, f"http://{host}/p/{page}"
            batch.append(request)
        batches.append(batch)
        new.update(urls)
    started = time.perf_counter()
    for batch in batches:
        await frontier.enqueue(batch)
    cost = (time.perf_counter() - started) / sum(map(len, batches)) * 1e6
    assert frontier.pending() == len(new), f"{frontier.pending()} queued of {len(new)} new links"
    await frontier.close()
    return cost


def spill_cost(hosts: int = 2000, pages: int = 2000) -> float:
    """µs a request: ``pages`` pages' links spilled (20 to the page's host, 3 to others), then all read
    back one request at a time, host after host, as a frontier of many hosts refills its window."""
    spider = Spider(name="spill")
    spill = SpillQueue(spider)
    seq = 0
    rows = []
    for page in range(pages):
        host = f"h{page % hosts}.test"
        links = [(host, f"http://{host}/p/{page}/{n}") for n in range(20)]
        others = [f"h{(page * 7 + n) % hosts}.test" for n in range(3)]
        links += [(other, f"http://{other}/x/{page}") for other in others]
        batch = []
        for name, url in links:
            seq += 1
            request = Request(url)
            request.depth, request.referer = 2, f"http://{host}/p/{page}"
            batch.append((seq, name, request))
        rows.append(batch)
    started = time.perf_counter()
    for batch in rows:
        spill.put(batch)
    left = {f"h{h}.test" for h in range(hosts)}
    taken = 0
    while left:
        for host in list(left):
            got, following = spill.take(host, 1)
            taken += len(got)
            if following is None:
                left.discard(host)
    cost = (time.perf_counter() - started) / seq * 1e6
    spill.close()
    assert taken == seq, f"{taken} of {seq} read back"
    return cost


def extraction_cost(pages: int = 300) -> tuple[float, float, float]:
    bodies = [render(i, 20000).encode() for i in range(pages)]
    responses = [Response(f"http://127.0.0.1:8080/p/{i}.html", body=body) for i, body in enumerate(bodies)]
    started = time.perf_counter()
    for response in responses:
        response.css("h1.title::text").get()  # parses the page
    parse_cost = (time.perf_counter() - started) / pages * 1e6
    started = time.perf_counter()
    links = sum(len(response.follow_all(css="a")) for response in responses)
    follow_cost = (time.perf_counter() - started) / pages * 1e6
    rule = Rule(deny=r"/admin/")
    started = time.perf_counter()
    kept = sum(len(response.follow_all(rule=rule)) for response in responses)
    rule_cost = (time.perf_counter() - started) / kept * 1e6
    return parse_cost, follow_cost * pages / links, rule_cost


def main() -> dict[str, float]:
    """Run every micro-benchmark (best of 3 each); print and return the figures."""
    results: dict[str, Any] = {}
    runs = [asyncio.run(dispatch_cost()) for _ in range(3)]
    results["dispatch_us_per_event"] = min(runs)
    results["owner_dispatch_us_per_event"] = min(asyncio.run(dispatch_cost(owner=True)) for _ in range(3))
    dedupe = [asyncio.run(dedupe_cost()) for _ in range(3)]
    results["fingerprint_us_per_url"] = min(d[0] for d in dedupe)
    results["enqueue_new_us_per_url"] = min(d[1] for d in dedupe)
    results["enqueue_repeat_us_per_url"] = min(d[2] for d in dedupe)
    results["bloom_add_us_per_new"] = min(bloom_cost() for _ in range(3))
    results["handout_us_per_request"] = min(asyncio.run(handout_cost()) for _ in range(3))
    results["handout_names_us_per_request"] = min(asyncio.run(handout_cost(names=True)) for _ in range(3))
    results["broad_enqueue_us_per_link"] = min(asyncio.run(broad_enqueue_cost()) for _ in range(3))
    results["spill_us_per_request"] = min(spill_cost() for _ in range(3))
    extraction = [extraction_cost() for _ in range(3)]
    results["parse_us_per_page"] = min(e[0] for e in extraction)
    results["follow_all_us_per_link"] = min(e[1] for e in extraction)
    results["follow_rule_us_per_link"] = min(e[2] for e in extraction)
    for key, value in results.items():
        print(f"{key:<28} {value:8.2f}")
    return results


if __name__ == "__main__":
    main()
