"""The TOML and console examples of docs/monitors.md and docs/alerts.md, run for real."""

from __future__ import annotations

import re
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from eclaw.alerts import load_alerts
from eclaw.observe.report import render_report
from eclaw.testing import serve
from tests.monitors.test_monitors import _site, crawl

DOCS = Path(__file__).parents[2] / "docs"


def toml_block(page: str) -> str:
    found = re.search(r"```toml\n(.*?)```", (DOCS / page).read_text(), re.S)
    assert found is not None
    return found.group(1)


@pytest.fixture
async def hooks() -> AsyncIterator[tuple[list[object], str]]:
    posts: list[object] = []

    async def receive(request: web.Request) -> web.Response:
        posts.append(await request.json())
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/{path:.*}", receive)
    async with serve(app) as base:
        yield posts, base


async def test_the_monitors_page_example(
    tmp_path: Path, hooks: tuple[list[object], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    posts, base = hooks
    monkeypatch.setenv("SLACK_WEBHOOK_URL", f"{base}/services/T0/B0/doc-token-1234")
    async with serve(_site()) as site:
        code, output, record = await crawl(tmp_path, site, toml_block("monitors.md"))
    assert code == 3, output  # 10 items, fewer than the 100 the page asks for
    assert "monitor item_count: FAILED - items stored 10 is below the minimum 100" in output
    assert "monitor coverage.price: FAILED - 'price' in 80.0% of 10 items (minimum 95.0%)" in output
    assert (tmp_path / "eclaw-data" / "shop.monitors.json").is_file() and record["ok"] is False
    assert posts and "doc-token-1234" not in output
    page = render_report([], monitors=record)
    assert "Monitors (some FAILED)" in page and "coverage.price" in page


def test_the_alerts_page_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_WEBHOOK_URL", "https://hooks.slack.example/services/T/B/slack-token-1")
    monkeypatch.setenv("SMTP_PASSWORD", "smtp-password-1")
    alerter = load_alerts(tomllib.loads(toml_block("alerts.md")))
    assert [type(c).__name__ for c in alerter.channels] == ["WebhookChannel", "WebhookChannel", "EmailChannel"]
    assert alerter.delivery.rate_limit == 5 and alerter.delivery.drain == 30
    assert "slack-token-1" not in repr(alerter.channels) and "smtp-password-1" not in repr(alerter.channels)
    assert alerter.redactor.text("smtp-password-1 slack-token-1") == "*** ***"
