"""The broad-crawl benchmark measures what it says: the site answers as many hosts by local address,
with the faults it promises, and the politeness bound and the waits of ready hosts come out right
on hand-made logs."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest

from bench import broad
from bench.broad import Config, check_items, run_one
from bench.broad_site import RETRY_AFTER, Host, Site, address, host_index, listen, make_hosts, title
from bench.broad_stats import Record, ideal_pages, politeness, waits
from bench.site import free_port


def test_addresses_are_distinct_loopback_hosts() -> None:
    seen = {address(i) for i in range(70_000)}
    assert len(seen) == 70_000
    assert all(host_index(address(i)) == i for i in (0, 249, 250, 62_499, 62_500, 69_999))
    assert host_index("127.0.0.1") is None and host_index("10.1.1.1") is None


def test_the_site_is_the_same_for_every_run() -> None:
    assert make_hosts("broad", 500, 7) == make_hosts("broad", 500, 7)
    hosts = make_hosts("broad", 2000, 1)
    assert {h.fault for h in hosts} == {"", "429", "503", "reset"}
    assert any(h.pages >= 1000 for h in hosts) and sum(h.pages <= 10 for h in hosts) > 800
    assert all(0.02 <= h.latency <= 0.8 or h.latency == 3.0 for h in hosts)


async def test_server_answers_each_host_by_its_address() -> None:
    hosts = [Host(0, 30, 0.0), Host(1, 2, 0.05, "429"), Host(2, 1, 0.0, "503"), Host(3, 1, 0.0, "reset")]
    site = Site("broad", hosts, free_port())
    server, listener = await listen(site)
    base = f"http://{address(0)}:{site.port}"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/p/1") as response:
                body = await response.text()
            assert response.status == 200 and f"<h1>{title(0, 1)}</h1>" in body
            assert 'href="/p/21"' in body  # its first child: page 1 links to 21..29
            other = f"http://{address(1)}:{site.port}/"
            async with session.get(other) as first, session.get(other) as second:
                assert (first.status, first.headers["Retry-After"]) == (429, str(RETRY_AFTER))
                assert second.status == 200 and title(1, 0) in await second.text()
            async with session.get(f"http://{address(2)}:{site.port}/") as failing:
                assert failing.status == 503
            with pytest.raises(aiohttp.ClientError):
                async with session.get(f"http://{address(3)}:{site.port}/") as reset:
                    await reset.read()
            async with session.get(f"{base}/p/30") as missing:
                assert missing.status == 404
    finally:
        listener.close()
    answers = [(h, p, s) for _, _, h, p, s in server.log]
    assert [a for a in answers if a[0] != 3] == [(0, 1, 200), (1, 0, 429), (1, 0, 200), (2, 0, 503), (0, 30, 404)]
    assert {a for a in answers if a[0] == 3} == {(3, 0, 0)}  # reset (aiohttp tries a reset request twice)


def test_bound_is_one_page_per_delay_or_latency_per_host() -> None:
    hosts = [Host(0, 1000, 0.1), Host(1, 3, 0.1), Host(2, 1000, 3.0), Host(3, 1000, 0.1, "429"), Host(4, 9, 0, "503")]
    # 10 s at 2 s: 5 pages; 3 pages then nothing; every 3 s: 4; two requests a page: 2; none.
    assert ideal_pages(hosts, 2.0, 10.0) == 5 + 3 + 4 + 2
    assert ideal_pages(hosts, 2.0, 10.0, loose=True) == 5 + 3 + 2 + 2  # every 2.1 s, 5 s: 5, 3, 2, 2


def _site() -> Site:
    return Site("single", [Host(0, 41, 0.1)], 80)  # page 0 links to 1..20, page 1 to 21..40


def test_no_wait_when_a_ready_host_is_asked_at_once() -> None:
    log = [Record(2.0 * k, 2.0 * k + 0.1, 0, k, 200) for k in range(5)]
    result = waits(_site(), log, 2.0, 0.0, 9.9)
    assert result["max_s"] == pytest.approx(0.0, abs=1e-9) and result["gaps"] == 5
    assert politeness(log, _site().hosts, 2.0, 0.0, 9.9)["gaps_under_delay"] == 0


def test_a_host_left_waiting_shows_its_wait() -> None:
    # asked at 0, 2, then not before 9: ready at 4 (2 + delay), so 5 s of waiting; then starved to the end
    log = [Record(0.0, 0.1, 0, 0, 200), Record(2.0, 2.1, 0, 1, 200), Record(9.0, 9.1, 0, 2, 200)]
    result = waits(_site(), log, 2.0, 0.0, 20.0)
    assert result["max_s"] == pytest.approx(9.0)  # from 11 (9 + delay) to the end at 20
    assert (result["gaps"], result["over_1s"], result["median_s"]) == (4, 2, pytest.approx(2.5))


def test_a_page_answered_429_is_ready_again_after_retry_after() -> None:
    site = Site("single", [Host(0, 1, 0.1, "429")], 80)  # one page: nothing else to ask meanwhile
    log = [Record(0.0, 0.1, 0, 0, 429), Record(0.1 + RETRY_AFTER + 0.5, 3.7, 0, 0, 200)]
    assert waits(site, log, 2.0, 0.0, 10.0)["max_s"] == pytest.approx(0.5)


def test_requests_closer_than_the_delay_are_counted() -> None:
    hosts = [Host(0, 9, 0.1), Host(1, 1, 0.1, "reset")]
    log = [Record(0.0, 0.1, 0, 0, 200), Record(1.5, 1.6, 0, 1, 200), Record(3.5, 3.6, 0, 2, 200)]
    log += [Record(0.0, 0.1, 1, 0, 0), Record(0.1, 0.1, 1, 0, 0)]
    log.sort(key=lambda r: r.arrived)
    result = politeness(log, hosts, 2.0, 0.0, 10.0)
    assert result == {"min_gap_s": pytest.approx(1.5), "gaps_under_delay": 1, "failing_hosts": 1}


async def test_the_merged_site_serves_the_broad_sites_pages_as_one_host() -> None:
    hosts = make_hosts("merged", 300, 3)
    assert [(h.pages, h.fault) for h in hosts] == [(h.pages, h.fault) for h in make_hosts("broad", 300, 3)]
    assert all(h.latency == 0 for h in hosts)
    site = Site("merged", hosts, free_port())
    healthy = next(h for h in hosts if h.healthy and h.pages > 30 and h.index)
    assert site.seeds()[healthy.index] == f"http://{address(0)}:{site.port}/h/{healthy.index}/"
    server, listener = await listen(site)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://{address(0)}:{site.port}/h/{healthy.index}/p/1") as response:
                body = await response.text()
            assert response.status == 200 and f"<h1>{title(healthy.index, 1)}</h1>" in body
            assert f'href="/h/{healthy.index}/p/21"' in body  # its first child, on the one host
            assert body.count('href="/h/') == len(site.links(healthy.index, 1))  # the other hosts' links too
            with pytest.raises(aiohttp.ClientError):  # the merged site is one address
                async with session.get(f"http://{address(1)}:{site.port}/") as other:
                    await other.read()
    finally:
        listener.close()
    assert [(h, p, s) for _, _, h, p, s in server.log] == [(healthy.index, 1, 200)]


def test_items_of_the_merged_site_are_checked_by_their_host_and_page(tmp_path: Path) -> None:
    base = f"http://{address(0)}:8000"
    rows = [(f"{base}/h/7/", title(7, 0)), (f"{base}/h/7/p/3", title(7, 3)), (f"{base}/h/9/p/1", title(9, 2))]
    rows.append(rows[0])
    out = tmp_path / "items.jsonl"
    out.write_text("".join(json.dumps({"url": u, "title": t}) + "\n" for u, t in rows))
    assert check_items(out, 3) == {"items": 4, "duplicates": 1, "wrong": 1, "of_served": 3}


def test_the_floor_crawls_every_page_once_with_the_right_titles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hand-written floor (``baseline``) is a crawler the figures can stand on: on a one-host
    site it fetches every page, once, and extracts each title."""
    monkeypatch.setattr(broad, "CACHE", tmp_path)  # not the benchmark's own runs
    config = Config("single", "single", 1, 30.0, 0.0, 8, 8, pages=300)
    run = run_one("baseline", config)
    assert run["stopped"] == "finished, exit 0", run
    assert run["items"] == {"items": 300, "duplicates": 0, "wrong": 0, "of_served": 300}
    assert run["requests"] == 300


def test_rounds_alternate_the_order_and_each_figure_is_the_median_round() -> None:
    assert broad.alternated(["eclaw", "eclaw@../old"], 3) == [
        "eclaw", "eclaw@../old", "eclaw@../old", "eclaw", "eclaw", "eclaw@../old",
    ]  # fmt: skip
    assert broad.kind("eclaw-dns@../old") == "eclaw-dns" and broad.kind("baseline") == "baseline"
    config = Config("broad-10", "broad", 10, 1.0, 2.0, 1, 10)
    runs = [
        {"contender": "eclaw", "config": "broad-10", "pages_per_s": rate, "of_bound": rate / 10, "waits": {"max_s": 1}}
        for rate in (3.0, 1.0, 5.0)
    ]
    assert broad.summary(runs, [config])["eclaw"]["broad-10"]["of_bound"] == 0.3


def test_a_checkout_compared_side_by_side_runs_from_its_bytecode(tmp_path: Path) -> None:
    """``eclaw@DIR`` gets DIR's bytecode written first: with ``PYTHONDONTWRITEBYTECODE`` set a fresh worktree
    would compile every module in every run, and its figures would count the compiling."""
    from bench.run import env_for

    package = tmp_path / "eclaw"
    package.mkdir()
    (package / "__init__.py").write_text("VERSION = 1\n")
    env = env_for(f"eclaw@{tmp_path}")
    assert env is not None and env["PYTHONPATH"] == str(tmp_path)
    assert list((package / "__pycache__").glob("__init__.*.pyc"))
