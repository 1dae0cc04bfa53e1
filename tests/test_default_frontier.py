"""Frontier: filters, dedupe, order and politeness; URL fingerprints."""

from __future__ import annotations

import asyncio
import io
import random
import sys
from typing import Any

import pytest

from eclaw import Request, Response, Settings, Spider
from eclaw.frontier.base import fingerprint
from eclaw.frontier.default import DefaultFrontier
from eclaw.frontier.dupefilter import BloomDupeFilter, SetDupeFilter
from eclaw.http.urls import canonical_url


class Site(Spider):
    name = "site"
    allowed_domains = ["shop.test"]

    def parse(self, response: Response) -> Any:
        return None


async def opened(**settings: Any) -> DefaultFrontier:
    frontier = DefaultFrontier()
    await frontier.open(Site(), Settings(**settings), lambda: None)
    return frontier


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("HTTP://Shop.TEST:80/a?b=2&a=1#frag", "http://shop.test/a?a=1&b=2"),
        ("https://shop.test:443", "https://shop.test/"),
        ("http://shop.test/%7euser", "http://shop.test/~user"),
    ],
)
def test_canonical_url_equivalences(a: str, b: str) -> None:
    assert canonical_url(a) == canonical_url(b)
    assert fingerprint(Request(a)) == fingerprint(Request(b))


def test_fingerprint_includes_method_and_body_and_port() -> None:
    get = fingerprint(Request("http://shop.test/"))
    assert get != fingerprint(Request("http://shop.test/", method="POST"))
    assert fingerprint(Request("http://shop.test/", method="POST", body=b"1")) != fingerprint(
        Request("http://shop.test/", method="POST", body=b"2")
    )
    assert get != fingerprint(Request("http://shop.test:8080/"))


@pytest.mark.parametrize("dupefilter", [BloomDupeFilter(1000, 0.001), SetDupeFilter()])
def test_dupefilters(dupefilter: Any) -> None:
    assert dupefilter.add(b"a") and not dupefilter.add(b"a") and dupefilter.add(b"b")
    assert len(dupefilter) == 2


def test_bloom_filter_grows_past_its_capacity_and_keeps_its_error_rate() -> None:
    # Sized for 500 URLs, it takes 20,000: every one is still known, and new ones are rarely taken for seen ones.
    bloom = BloomDupeFilter(500, 0.001)
    rng = random.Random(5)
    keys = [rng.randbytes(20) for _ in range(20000)]
    assert sum(bloom.add(key) for key in keys) >= 19950  # 0.1 % would be 20 taken for seen ones
    assert not any(bloom.add(key) for key in keys)
    false_positives = sum(not bloom.add(rng.randbytes(20)) for _ in range(50000))
    assert false_positives <= 100  # 0.1 % would be 50
    assert len(bloom) >= 19950 + 50000 - 100


def test_a_bloom_filter_saved_by_a_stage_that_hashed_fingerprints_loads_the_same() -> None:
    # Its stages hold each fingerprint's stable hash as their item (a C hash function, not a Python one
    # called per stage): the bits must be those of a stage hashing the fingerprints themselves, which
    # saved --state folders hold.
    from rbloom import Bloom

    from eclaw.frontier.dupefilter import _stable_hash

    rng = random.Random(3)
    fps = [rng.randbytes(20) for _ in range(300)]
    bloom, old = BloomDupeFilter(1000, 0.001), Bloom(1000, 0.001 / 2, _stable_hash)
    for fp in fps:
        bloom.add(fp)
        old.add(fp)
    assert bloom._stages[0][0].save_bytes() == old.save_bytes()
    saved = io.BytesIO()
    bloom.dump(saved)
    again = BloomDupeFilter()
    again.load(io.BytesIO(saved.getvalue()))
    assert not any(again.add(fp) for fp in fps) and again.add(rng.randbytes(20))


def test_bloom_filter_is_small_per_million() -> None:
    defaults = Settings()
    bloom = BloomDupeFilter(defaults.dupefilter_capacity, defaults.dupefilter_error_rate)
    for n in range(20000):
        bloom.add(n.to_bytes(8, "big"))
    bloom_bytes = bloom.nbytes
    assert bloom_bytes < 4.0 * 1024 * 1024  # ~3.8 MB, sized for a million URLs at 1e-6 false positives
    # An exact set of just 32,000 SHA-1 fingerprints already outweighs it.
    fingerprints = {n.to_bytes(20, "big") for n in range(32000)}
    set_bytes = sys.getsizeof(fingerprints) + sum(sys.getsizeof(f) for f in fingerprints)
    assert set_bytes > bloom_bytes


async def test_filters_and_reasons() -> None:
    frontier = await opened(max_depth=2, max_url_length=60)
    cases = {
        "http://shop.test/ok": None,
        "http://shop.test/ok#again": "duplicate",
        "http://other.test/": "offsite",
        "http://sub.shop.test/": None,
        "mailto:a@shop.test": "unsupported scheme",
        "javascript:void(0)": "unsupported scheme",
        "data:text/html,hi": "unsupported scheme",
        "file:///etc/passwd": "unsupported scheme",
        "ftp://shop.test/f": "unsupported scheme",
        "http://shop.test/" + "x" * 80: "url too long",
    }
    for url, reason in cases.items():
        assert await frontier.enqueue([Request(url)]) == [reason], url
    assert await frontier.enqueue([Request("http://shop.test/deep", depth=3)]) == ["max depth"]
    assert await frontier.enqueue([Request("http://shop.test/ok", dont_filter=True)]) == [None]
    assert await frontier.enqueue([Request("http://other.test/", dont_filter=True)]) == [None]
    assert frontier.pending() == 4


async def test_priority_then_fifo() -> None:
    frontier = await opened(concurrency_per_domain=100, concurrency=100)
    for n, priority in enumerate([0, 5, 0, 5, -1]):
        await frontier.enqueue([Request(f"http://shop.test/{n}", priority=priority)])
    order = []
    while (request := await frontier.next_request()) is not None:
        order.append(request.url.rsplit("/", 1)[1])
    assert order == ["1", "3", "0", "2", "4"]


async def test_global_and_per_domain_slots() -> None:
    frontier = DefaultFrontier()
    spider = Site(allowed_domains=[])
    await frontier.open(spider, Settings(concurrency=3, concurrency_per_domain=2), lambda: None)
    for host in ("a.test", "b.test"):
        for n in range(3):
            await frontier.enqueue([Request(f"http://{host}/{n}")])
    got = [await frontier.next_request() for _ in range(4)]
    hosts = [r.url.split("/")[2] for r in got if r is not None]
    assert len(hosts) == 3 and hosts.count("a.test") <= 2 and hosts.count("b.test") <= 2
    first = next(r for r in got if r is not None)
    await frontier.release(first)
    assert await frontier.next_request() is not None
    assert frontier.pending() == 2


async def test_download_delay_spaces_requests_and_wakes() -> None:
    woken = asyncio.Event()
    frontier = DefaultFrontier()
    await frontier.open(Site(), Settings(download_delay=0.2), woken.set)
    await frontier.enqueue([Request("http://shop.test/1")])
    await frontier.enqueue([Request("http://shop.test/2")])
    first = await frontier.next_request()
    assert first is not None
    assert await frontier.next_request() is None  # delay not elapsed
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(woken.wait(), 2)
    assert loop.time() - started >= 0.15
    assert await frontier.next_request() is not None
    await frontier.close()


def test_recent_set_is_bounded_and_exact() -> None:
    from eclaw.frontier.dupefilter import RecentSet

    recent = RecentSet(size=10)
    for n in range(35):
        recent.add(str(n))
    assert len(recent.new) + len(recent.old) <= 20
    assert "34" in recent and "25" in recent and "0" not in recent


async def test_repeats_beyond_the_recent_window_are_still_duplicates() -> None:
    frontier = DefaultFrontier()
    await frontier.open(Site(), Settings(concurrency=1000, concurrency_per_domain=1000), lambda: None)
    frontier._recent.size = 5  # force the exact window to roll over
    urls = [f"http://shop.test/{n}" for n in range(50)]
    assert await frontier.enqueue([Request(u) for u in urls]) == [None] * 50
    assert await frontier.enqueue([Request(u + "#x") for u in urls]) == ["duplicate"] * 50
