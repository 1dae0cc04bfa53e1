"""The browser fetcher's vocabulary and settings, checked without a browser: page actions as JSON
(built, checked, saved with a request), bad input as one-line errors, a missing extra named."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from eclaw import ConfigError, Request, Settings, Spider
from eclaw.fetchers.browser import BrowserFetcher, Plan, actions
from eclaw.frontier.serial import dumps, loads


class Gigs(Spider):
    name = "gigs"

    def parse_gig(self, response: Any) -> None:
        return None


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({"actions": [{"clik": "button"}]}, "step 1 has no action: give one of wait_for, click, scroll"),
        ({"actions": [{"click": "a", "scroll": 2}]}, "step 1 has several actions (click, scroll)"),
        ({"actions": [{"click": "a", "time": 2}]}, "click takes options: times, wait, not 'time'"),
        ({"actions": [{"scroll": 0}]}, "must be a whole number of at least 1, got 0"),
        ({"actions": [{"scroll": 2, "max": 5}]}, "max goes with 'until_stable'"),
        ({"actions": [{"wait_for": ""}]}, "needs a CSS selector"),
        ({"actions": [{"wait_for": "a", "state": "shown"}]}, "state must be one of attached, detached"),
        ({"actions": [{"sleep": -1}]}, "must be a non-negative number"),
        ({"actions": [{"script": 3}]}, "must be JavaScript source"),
        ({"wait_until": "idle"}, "wait_until'] must be one of commit, domcontentloaded, load, networkidle"),
        ({"timeout": 0}, "timeout'] must be a positive number"),
        ({"actions": {"click": "a"}}, "must be a list of steps"),
        ({"click": "a"}, "unknown key 'click' (known: wait_until, actions, timeout, context)"),
        ("wait_for li", "meta['browser'] must be a dict"),
    ],
)
def test_bad_page_actions_are_one_line_config_errors(declared: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Plan.parse(declared)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_actions_builds_plain_json_that_a_saved_request_keeps() -> None:
    built = actions({"scroll": "until_stable"}, {"click": "a.more", "times": 3}, wait_until="networkidle", timeout=9)
    assert built == {
        "actions": [{"scroll": "until_stable"}, {"click": "a.more", "times": 3}],
        "wait_until": "networkidle",
        "timeout": 9,
    }
    spider = Gigs()
    request = Request("https://gigs.test/gig/2", spider.parse_gig, render=True, meta={"browser": built})
    again = loads(dumps(request, spider), spider)  # as --state, the spilled frontier and Redis keep it
    assert again.meta == {"render": True, "browser": built}
    assert Plan.parse(again.meta["browser"]) == Plan.parse(built)
    assert [step.describe() for step in Plan.parse(built).steps] == ["scroll until_stable", "click 'a.more'"]
    assert json.loads(json.dumps(built)) == built
    with pytest.raises(ConfigError, match=r"^actions\(\): step 2 \(click\) times must be a whole number"):
        actions({"sleep": 1}, {"click": "a", "times": 0})


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"browser_pages": 0}, "'browser_pages' must be at least 1"),
        ({"browser_contexts": 0}, "'browser_contexts' must be at least 1"),
        ({"browser_context_pages": -1}, "'browser_context_pages' must not be negative"),
        ({"browser_xhr_bytes": -1}, "'browser_xhr_bytes' must not be negative"),
        ({"browser_timeout": 0}, "'browser_timeout' must be positive"),
        ({"browser_block": "image,images"}, "unknown resource type 'images'"),
        ({"browser_block": "document"}, "unknown resource type 'document'"),
    ],
)
def test_bad_browser_settings_are_one_line_config_errors(setting: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings(**setting)
    with pytest.raises(ConfigError, match=message):  # as -s KEY=VALUE gives them
        Settings().replace({key: str(value) for key, value in setting.items()})


async def test_a_spider_with_bad_default_actions_is_refused_when_the_browser_opens() -> None:
    class Broken(Spider):
        name = "broken"
        browser = {"actions": [{"tap": "button"}]}

    with pytest.raises(ConfigError, match="spider 'broken': browser: step 1 has no action"):
        await BrowserFetcher().open(Broken(), Settings())


async def test_without_playwright_or_chromium_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="no program '/opt/no-chromium'"):
        await BrowserFetcher().open(Gigs(), Settings(browser_executable="/opt/no-chromium"))
    monkeypatch.setitem(sys.modules, "playwright.async_api", None)  # as if the extra were not installed
    with pytest.raises(ConfigError, match=r"render=True needs Playwright: pip install 'eclaw\[browser\]'"):
        await BrowserFetcher().open(Gigs(), Settings())
