"""UserAgent, Throttle and HttpCache against a local site."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.events import RequestFailed
from eclaw.middlewares import BROWSERS, HttpCache, Retry, Throttle, UserAgent, defaults
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, assert_spaced, recorder
from tests.sites import FlakySite, fault_app


class Echo(Spider):
    name = "echo"

    def parse(self, response: Response) -> Any:
        yield {"url": response.url, "headers": response.json()["headers"], "cached": response.from_cache}


async def echoed(engine: Engine, paths: list[str], spider: type[Spider] = Echo) -> list[dict[str, Any]]:
    async with serve(fault_app()) as base:
        items, stats = await collect(spider, engine=engine, start_urls=[base + p for p in paths])
    assert_accounted(stats)
    return sorted(items, key=lambda i: i["url"])


# -- UserAgent ----------------------------------------------------------------------


async def test_default_is_one_realistic_browser_ua_with_matching_headers() -> None:
    items = await echoed(Engine(), [f"/echo?{n}" for n in range(4)])
    ua, accept, language = BROWSERS[0]
    assert {i["headers"]["User-Agent"] for i in items} == {ua}
    assert ua.startswith("Mozilla/5.0") and "Chrome/" in ua
    assert {(i["headers"]["Accept"], i["headers"]["Accept-Language"]) for i in items} == {(accept, language)}


async def test_rotation_from_a_file_and_sticky_per_host(tmp_path: Path) -> None:
    agents = tmp_path / "agents.txt"
    agents.write_text(
        "# mine\nbot-a/1\nbot-b/1\nMozilla/5.0 (X11; Linux x86_64; rv:145.0) Gecko/20100101 Firefox/145.0\n"
    )
    engine = Engine(middlewares=[UserAgent(agents, rotate="round-robin")], overrides={"concurrency": 1})
    items = await echoed(engine, [f"/echo?{n}" for n in range(6)])
    used = [i["headers"]["User-Agent"] for i in items]
    assert set(used) == {"bot-a/1", "bot-b/1", used[-1]} and len(set(used)) == 3
    firefox = next(i for i in items if "Firefox" in i["headers"]["User-Agent"])
    assert firefox["headers"]["Accept-Language"] == "en-US,en;q=0.5"
    sticky = Engine(middlewares=[UserAgent(rotate="random", sticky=True, rng=random.Random(3))])
    items = await echoed(sticky, [f"/echo?{n}" for n in range(6)])
    assert len({i["headers"]["User-Agent"] for i in items}) == 1  # one host, one UA


async def test_spider_and_request_user_agents_win() -> None:
    class Named(Echo):
        user_agent = "named-bot/2"

        def start_requests(self) -> Any:
            yield Request(self.start_urls[0])
            yield Request(self.start_urls[0] + "?own", headers={"user-agent": "own/1"})

    items = await echoed(Engine(middlewares=[UserAgent(rotate="random")]), ["/echo"], Named)
    assert [i["headers"]["User-Agent"] for i in items] == ["named-bot/2", "own/1"]
    setting = Engine(Settings(user_agent="from-settings/3"))
    assert (await echoed(setting, ["/echo"]))[0]["headers"]["User-Agent"] == "from-settings/3"


def test_user_agent_arguments_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="rotate must be"):
        UserAgent(rotate="sometimes")
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(ValueError, match="empty"):
        UserAgent(tmp_path / "empty.txt")


# -- Throttle -----------------------------------------------------------------------


async def test_throttle_spaces_downloads_and_backs_off_on_429() -> None:
    site = FlakySite()
    throttle = Throttle(target_concurrency=1.0, start_delay=0.2, min_delay=0.1, max_delay=0.8)

    class Many(Spider):
        name = "many"

        def start_requests(self) -> Any:
            for n in range(5):
                yield Request(f"{self.base}/ok/{n}")
            yield Request(f"{self.base}/fail/busy?times=2&status=429")

        def parse(self, response: Response) -> Any:
            yield {"title": response.css("title::text").get()}

    engine = Engine(middlewares=[Retry(3, base=0.01), throttle])
    async with serve(site.app()) as base:
        items, stats = await collect(Many, engine=engine, base=base)
    assert len(items) == 6
    starts = sorted(t for times in site.hits.values() for t in times)
    assert_spaced(starts, 0.1)  # the throttle's delay reached the frontier
    assert starts[1] - starts[0] >= 0.19  # the start delay before any latency was seen
    assert throttle.delays["127.0.0.1"] >= 0.2  # two 429s doubled it from the 0.1 floor
    assert_accounted(stats)


def test_throttle_delay_rules() -> None:
    throttle = Throttle(target_concurrency=2.0, start_delay=1.0, min_delay=0.1, max_delay=5.0)
    throttle._floor = 0.1
    throttle.delays["h"] = 1.0
    throttle._observe("h", latency=0.2, status=200)  # toward 0.2 / 2 = 0.1
    assert throttle.delays["h"] == pytest.approx(0.55)
    throttle._observe("h", latency=0.0, status=500)  # an error never lowers it
    assert throttle.delays["h"] == pytest.approx(0.55)
    throttle._observe("h", latency=0.0, status=429)
    assert throttle.delays["h"] == pytest.approx(1.1)
    for _ in range(10):
        throttle._observe("h", latency=0.0, status=503)
    assert throttle.delays["h"] == 5.0  # capped
    for _ in range(40):
        throttle._observe("h", latency=0.0, status=200)
    assert throttle.delays["h"] == pytest.approx(0.1)  # never under the minimum


async def test_autothrottle_setting_turns_it_on() -> None:
    assert any(isinstance(m, Throttle) for m in defaults(Settings(autothrottle=True)))
    assert not any(isinstance(m, Throttle) for m in defaults(Settings()))
    assert not any(isinstance(m, Retry) for m in defaults(Settings(retries=0)))


# -- HttpCache ----------------------------------------------------------------------


async def test_http_cache_replays_offline(tmp_path: Path) -> None:
    hits: list[str] = []

    async def counted(request: web.Request) -> web.Response:
        hits.append(request.path_qs)
        if request.path == "/broken":
            return web.Response(status=503, text="down")
        return web.json_response({"headers": {"n": str(len(hits))}})

    app = web.Application()
    app.router.add_get("/{tail:.*}", counted)

    class Once(Echo):
        def start_requests(self) -> Any:
            yield Request(self.base + "/a")
            yield Request(self.base + "/b?x=1")
            yield Request(self.base + "/broken", meta={"dont_retry": True})

    cache_dir = tmp_path / "cache"
    async with serve(app) as base:
        first, stats1 = await collect(Once, engine=Engine(middlewares=[HttpCache(cache_dir)]), base=base)
    assert len(hits) == 3 and [i["cached"] for i in first] == [False, False]
    assert stats1.counters["cache stored"] == 2 and stats1.counters["cache miss"] == 3
    # the server is gone: the cache alone answers; the 503 was not stored
    failed: list[RequestFailed] = []
    engine = Engine(middlewares=[HttpCache(cache_dir, offline=True)])
    engine.subscribe(RequestFailed, recorder(failed))
    second, stats2 = await collect(Once, engine=engine, base=base)
    assert sorted(i["headers"]["n"] for i in second) == sorted(i["headers"]["n"] for i in first)
    assert all(i["cached"] for i in second) and stats2.counters["cache hit"] == 2
    assert [f.reason for f in failed] == ["cache miss"] and "not in the offline cache" in str(failed[0].error)
    assert_accounted(stats2)
    expired = Engine(middlewares=[HttpCache(cache_dir, expire=1e-9, offline=True)])
    _, stats3 = await collect(Once, engine=expired, base=base)
    assert stats3.requests_failed == 3  # everything stale


async def test_http_cache_setting_and_bad_dir(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert any(isinstance(m, HttpCache) for m in defaults(Settings(http_cache=str(tmp_path / "c"))))
    engine = Engine(middlewares=[HttpCache(tmp_path / "file" / "sub")])
    with pytest.raises(Exception, match="http cache"):
        await collect(Echo, engine=engine, start_urls=["http://127.0.0.1:9/"])
