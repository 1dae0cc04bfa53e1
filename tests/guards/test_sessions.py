"""Guards of docs/sessions.md: a session serves at most ``max_usage`` responses, then is retired and
its cookies forgotten (the next session starts without them); a session whose error score (+1 per
connection error) reaches ``max_errors`` is retired too; each session goes through its own proxy
with its own user agent."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web

from eclaw import Engine, Response, Spider
from eclaw.middlewares import Sessions
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted
from tests.proxies import free_port, tinyproxy

PAGES = 10


def reading_room(visitors: Counter[str]) -> web.Application:
    """Gives each new visitor a card (a cookie) and counts the pages each card was shown."""
    cards = {"n": 0}

    async def page(request: web.Request) -> web.Response:
        card = request.cookies.get("card")
        if card is None:
            cards["n"] += 1
            card = f"card-{cards['n']}"
        visitors[card] += 1
        n = int(request.match_info["n"])
        link = f"<a href='/page/{n + 1}'>next</a>" if n + 1 < PAGES else ""
        answer = web.Response(text=f"<h1>{n}</h1>{link}", content_type="text/html")
        answer.set_cookie("card", card)
        return answer

    app = web.Application()
    app.router.add_get("/page/{n}", page)
    return app


class Reader(Spider):
    name = "reader"
    custom_settings = {"concurrency": 1, "store": ""}
    middlewares = [Sessions(1, max_usage=3)]

    def parse(self, response: Response) -> Any:
        jars = self.crawl.cookies  # what the first session's jar would still send, as this page is parsed
        first = jars.cookies("session-1", response.url) if jars is not None else {}
        yield {"page": int(response.css("h1::text").get("")), "session": response.meta["session"], "first": first}
        yield from response.follow_all(css="a")


async def test_a_session_is_retired_after_max_usage_responses_with_its_cookies() -> None:
    visitors: Counter[str] = Counter()
    async with serve(reading_room(visitors)) as base:
        items, stats = await collect(Reader, engine=Engine(), start_urls=[base + "/page/0"])
    assert_accounted(stats)
    assert len(items) == PAGES and stats.requests_failed == 0
    per_session = Counter(item["session"] for item in items)
    assert sorted(per_session.values()) == [1, 3, 3, 3]  # 3 responses each, then a fresh session
    assert sorted(visitors.values()) == [1, 3, 3, 3]  # and each fresh one came without the old card
    # the first session's cookies are forgotten when it is retired, on its third response
    assert [bool(item["first"]) for item in sorted(items, key=lambda item: item["page"])] == [True] * 2 + [False] * 8
    assert stats.counters["sessions retired"] == 3 and stats.counters["sessions created"] == 4
    assert stats.counters["sessions banned"] == 0


class Unlucky(Spider):
    name = "unlucky"
    custom_settings = {"concurrency": 1, "store": "", "retries": 0}
    middlewares = [Sessions(1, max_usage=0, max_errors=2)]

    def __init__(self, urls: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = urls or []


async def test_a_session_whose_error_score_reaches_max_errors_is_retired() -> None:
    dead = free_port()  # nobody listens there: each request is a connection error
    urls = [f"http://127.0.0.1:{dead}/{n}" for n in range(2)]
    _, stats = await collect(Unlucky, engine=Engine(), urls=urls)
    assert_accounted(stats)
    assert stats.requests_failed == 2
    assert stats.counters["sessions retired"] == 1 and stats.counters["sessions banned"] == 0  # 2 errors: retired


class Travellers(Spider):
    name = "travellers"
    custom_settings = {"concurrency": 1, "store": ""}

    def __init__(self, base: str = "", proxies: tuple[str, str] = ("", ""), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{base}/page/{n}" for n in range(6)]
        self.middlewares = [Sessions(2, proxies=proxies, user_agents=["Reader/A", "Reader/B"])]

    def parse(self, response: Response) -> Any:
        yield {"url": response.url, "session": response.meta["session"], "agent": response.css("h1::text").get()}


def agent_echo() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=f"<h1>{request.headers.get('User-Agent')}</h1>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/page/{n}", page)
    return app


async def test_each_session_goes_through_its_own_proxy_with_its_own_user_agent(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with (
        tinyproxy(tmp_path / "a") as (first, first_log),
        tinyproxy(tmp_path / "b") as (second, second_log),
        serve(agent_echo()) as base,
    ):
        proxies = (f"http://{first}", f"http://{second}")
        items, stats = await collect(Travellers, engine=Engine(), base=base, proxies=proxies)
    assert_accounted(stats)
    assert len(items) == 6 and {item["session"] for item in items} == {"session-1", "session-2"}
    logs = {"session-1": first_log.read_text(), "session-2": second_log.read_text()}
    agents = {"session-1": "Reader/A", "session-2": "Reader/B"}
    for item in items:
        own, other = item["session"], "session-2" if item["session"] == "session-1" else "session-1"
        assert f"GET {item['url']} " in logs[own] and f"GET {item['url']} " not in logs[other], item
        assert item["agent"] == agents[own]
