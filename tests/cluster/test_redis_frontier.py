"""The Redis frontier in process, against a real redis-server: dedupe, order, leases."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio

from eclaw import Request, Settings, Spider
from eclaw.cluster.frontier import RedisFrontier
from tests.cluster.servers import redis_server


class Named(Spider):
    name = "unit"

    def detail(self, response: object) -> None:
        return None


@pytest.mark.parametrize("dupefilter", ["bloom", "set"])
async def test_dedupe_priority_order_and_callbacks_by_name(tmp_path: Path, dupefilter: str) -> None:
    spider = Named()
    settings = Settings(dupefilter=dupefilter, concurrency=10, concurrency_per_domain=10)  # type: ignore[arg-type]
    with redis_server(tmp_path) as server:
        frontier = RedisFrontier(server.url)
        await frontier.open(spider, settings, lambda: None)
        try:
            urls = [f"http://127.0.0.1:1/{n}" for n in range(5)]
            reasons = await frontier.enqueue([Request(u, callback=spider.detail) for u in urls])
            assert reasons == [None] * 5
            again = [Request(urls[0] + "#fragment"), Request(urls[1]), Request(urls[1], dont_filter=True)]
            assert await frontier.enqueue(again) == ["duplicate", "duplicate", None]
            assert await frontier.enqueue([Request("http://127.0.0.1:1/urgent", priority=5)]) == [None]
            taken = [await frontier.next_request() for _ in range(7)]
            assert [r.url for r in taken if r] == ["http://127.0.0.1:1/urgent", *urls, urls[1]]
            assert taken[1] is not None and taken[1].callback == spider.detail
            assert await frontier.next_request() is None
        finally:
            await frontier.close()


async def test_leases_of_a_silent_worker_go_back_to_the_queue(tmp_path: Path) -> None:
    spider = Named()
    settings = Settings(lease_timeout=1.5)  # a stalled loop before first.done() must not make /a look abandoned
    with redis_server(tmp_path) as server:
        first, second = RedisFrontier(server.url, worker="first"), RedisFrontier(server.url, worker="second")
        await first.open(spider, settings, lambda: None)
        await second.open(spider, settings, lambda: None)
        try:
            await first.enqueue([Request("http://127.0.0.1:1/a"), Request("http://127.0.0.1:1/b")])
            taken = await first.next_request()
            assert taken is not None and taken.url.endswith("/a")
            assert first._beat is not None
            first._beat.cancel()  # "first" goes silent, holding /a
            await first.done(taken)  # ... but finished /a first: its lease is gone
            late = await first.next_request()  # takes /b, then is never heard of again
            assert late is not None and late.url.endswith("/b")
            for _ in range(100):
                await second._heartbeat()
                if second.reclaimed:
                    break
                await asyncio.sleep(0.05)
            assert second.reclaimed == 1  # /b, not /a
            again = await second.next_request()
            assert again is not None and again.url.endswith("/b")
        finally:
            await second.close()
            await first.close()


async def test_the_shared_bloom_filter_sets_exactly_the_bits_of_each_url(tmp_path: Path) -> None:
    """The layout a crawl's Redis keeps (a crawl started before must read on): bit p is SETBIT's bit p."""
    settings = Settings(dupefilter_capacity=1_000_000, dupefilter_error_rate=0.001, concurrency=10)
    urls = [f"http://127.0.0.1:1/länge/{n}?q={'x' * (n % 7)}" for n in range(3000)]
    with redis_server(tmp_path) as server:
        frontier = RedisFrontier(server.url)
        await frontier.open(Named(), settings, lambda: None)
        raw = redis.asyncio.Redis.from_url(server.url)  # bytes, not decoded
        try:
            assert await frontier.enqueue([Request(u) for u in urls]) == [None] * len(urls)
            expected = {at for url in urls for at in frontier._marks(Request(url))[1]}
            assert len(expected) > 25_000  # 10 bits a URL, 14.4 million bits: few shared
            stored = await raw.get(frontier.prefix + "bloom") or b""
            assert int.from_bytes(stored, "big").bit_count() == len(expected)
            assert all(stored[at // 8] >> (7 - at % 8) & 1 for at in expected)  # SETBIT counts from the left
            fresh = [Request(f"http://127.0.0.1:1/other/{n}") for n in range(500)]
            assert await frontier.add_seen(fresh) == [True] * 500  # at 0.1 %, none taken for a duplicate
            assert await frontier.add_seen(fresh[:3]) == [False] * 3
        finally:
            await raw.aclose()
            await frontier.close()


async def test_the_filter_bench_runs_each_filter_through_the_frontier(tmp_path: Path) -> None:
    """``python -m bench.redis_filter``: its figures come from real enqueues (not a timing test)."""
    from bench.redis_filter import cost

    with redis_server(tmp_path) as server:
        costs = [await cost(server.url, mode, 300) for mode in ("bloom", "set", "none")]
        client = redis.asyncio.Redis.from_url(server.url)
        queued = await client.zcard("eclaw:filter-bench:queue")
        await client.aclose()
    assert all(c > 0 for c in costs) and queued == 300  # the last run's URLs, all new


async def test_workers_share_a_busy_hosts_slots_and_none_starves(tmp_path: Path) -> None:
    """The worker that frees a slot asks again at once, the others after a pause: without a share each,
    the first worker on a host kept every slot (one of two workers crawled 85 % of a single host)."""
    spider = Named()
    settings = Settings(concurrency=4, concurrency_per_domain=4)
    with redis_server(tmp_path) as server:
        first, second = RedisFrontier(server.url, worker="first"), RedisFrontier(server.url, worker="second")
        await first.open(spider, settings, lambda: None)
        await second.open(spider, settings, lambda: None)
        try:
            await first.enqueue([Request(f"http://127.0.0.1:1/{n}") for n in range(12)])

            async def take(worker: RedisFrontier) -> list[Request]:
                taken = []
                while (request := await worker.next_request()) is not None:
                    taken.append(request)
                return taken

            mine = await take(first)
            assert len(mine) == 2  # its share: 4 slots / 2 workers (the others it leased wait for them)
            await second._heartbeat()
            # it knows what is queued (as the "work" message would tell it)
            assert len(await take(second)) == 2  # the host's other 2 slots
            await first.release(mine[0])
            assert await first.next_request() is not None  # a slot of its own freed: it takes it back at once
            assert await first.next_request() is None and await second.next_request() is None  # 4 downloading
        finally:
            await second.close()
            await first.close()
