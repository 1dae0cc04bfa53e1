"""The names retired by "one word per concept" (docs/architecture.md, Words) still work for one release,
and each use warns with a DeprecationWarning naming the new one."""

# eclaw-rename: keep file (this test spells the old names on purpose)

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator

import pytest

from eclaw import Engine, Response, Settings, Spider
from eclaw.cluster.frontier import RedisFrontier
from eclaw.core.callbacks import CallbackParser, Parser
from eclaw.fetchers.base import Fetcher
from eclaw.fetchers.browser import BrowserFetcher
from eclaw.fetchers.hops import HopHeaders, follow
from eclaw.fetchers.impersonate import ImpersonateFetcher
from eclaw.fetchers.plain import PlainFetcher
from eclaw.fetchers.router import Fetchers
from eclaw.frontier.base import Frontier
from eclaw.frontier.default import DefaultFrontier
from eclaw.testing import MockFetcher

OLD_NAMES = [  # (old module, old name, the object it stands for now)
    ("eclaw.downloaders.base", "Downloader", Fetcher),
    ("eclaw.downloaders.plain", "HttpDownloader", PlainFetcher),
    ("eclaw.downloaders.impersonate", "ImpersonateDownloader", ImpersonateFetcher),
    ("eclaw.downloaders.browser", "BrowserFetcher", BrowserFetcher),
    ("eclaw.downloaders.router", "Fetchers", Fetchers),
    ("eclaw.frontier.scheduler", "DefaultScheduler", DefaultFrontier),
    ("eclaw.frontier.base", "Scheduler", Frontier),
    ("eclaw.cluster.frontier", "RedisScheduler", RedisFrontier),
    ("eclaw.testing", "MockDownloader", MockFetcher),
    # modules that moved (a page's walk through fewer files, issue 40)
    ("eclaw.core.parser", "CallbackParser", CallbackParser),
    ("eclaw.core.parser", "Parser", Parser),
    ("eclaw.fetchers.redirects", "follow", follow),
    ("eclaw.sessions.hops", "HopHeaders", HopHeaders),
    ("eclaw.downloaders.redirects", "follow", follow),
]


@pytest.mark.parametrize(("module", "name", "now"), OLD_NAMES, ids=[f"{m}.{n}" for m, n, _ in OLD_NAMES])
def test_each_old_name_is_the_new_object_and_warns(module: str, name: str, now: object) -> None:
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{name} is deprecated, use eclaw\."):
        found = getattr(importlib.import_module(module), name)
    assert found is now


def test_the_old_import_statement_warns_too() -> None:
    with pytest.warns(DeprecationWarning, match=r"use eclaw\.fetchers\.plain\.PlainFetcher"):
        from eclaw.downloaders.plain import HttpDownloader
    assert HttpDownloader is PlainFetcher


def test_a_name_that_never_was_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Telepathy"):
        importlib.import_module("eclaw.downloaders.plain").Telepathy  # noqa: B018
    with pytest.raises(AttributeError, match="Nothing"):
        importlib.import_module("eclaw.frontier.base").Nothing  # noqa: B018


def test_the_old_setting_name_warns_and_sets_the_new_one() -> None:
    with pytest.warns(DeprecationWarning, match="setting 'scheduler_url' is deprecated, use 'frontier_url'"):
        settings = Settings().replace({"SCHEDULER_URL": "redis://127.0.0.1:1/0"})
    assert settings.frontier_url == "redis://127.0.0.1:1/0"
    with pytest.warns(DeprecationWarning, match="scheduler_url"):
        assert Settings.from_env({"ECLAW_SCHEDULER_URL": "redis://h/1"}).frontier_url == "redis://h/1"


async def test_the_engines_old_arguments_warn_and_are_used() -> None:
    calls: list[str] = []

    def frontier() -> DefaultFrontier:
        calls.append("frontier")
        return DefaultFrontier()

    def fetcher() -> MockFetcher:
        calls.append("fetcher")
        return MockFetcher({"https://one.test/": "<html><body>one page</body></html>"})

    with pytest.warns(DeprecationWarning) as caught:
        engine = Engine(Settings(store=""), scheduler=frontier, downloader=fetcher)
    old = sorted(str(w.message).split(" is ")[0] for w in caught)
    assert old == ["Engine(downloader=...)", "Engine(scheduler=...)"]

    class One(Spider):
        name = "one"
        start_urls = ("https://one.test/",)

        async def parse(self, response: Response) -> AsyncIterator[dict[str, str]]:
            yield {"url": response.url}

    async with engine:
        stats = await engine.crawl(One)
    assert stats.items_stored == 1
    assert calls == ["frontier", "fetcher"]


def test_an_unknown_engine_argument_is_still_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'schedular'"):
        Engine(schedular=DefaultFrontier)
