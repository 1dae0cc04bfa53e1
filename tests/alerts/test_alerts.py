"""Alerts against real receivers on 127.0.0.1: an aiohttp server collecting POSTs and an aiosmtpd
SMTP server with STARTTLS (a self-signed certificate made by the test)."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from email import message_from_bytes
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiosmtpd.controller import Controller

from eclaw.alerts import Alert, load_alerts
from eclaw.exceptions import ConfigError
from eclaw.testing import serve
from tests.proxies import self_signed

ALERT = Alert("monitor_failed", "price coverage fell", "price in 80% of items", {"spider": "shop"})


async def until(condition: Callable[[], bool], deadline: float = 20) -> None:
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        await asyncio.sleep(0.01)


class Receiver:
    """Collects POSTs; answers 500 to the first ``fail`` of them; hangs while ``hang`` is set."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.fail = 0
        self.hang = False
        self.release = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        if self.hang:
            await self.release.wait()
        if self.fail > 0:
            self.fail -= 1
            return web.Response(status=500)
        self.posts.append((request.path, await request.json()))
        return web.Response(text="ok")


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    got = Receiver()
    app = web.Application()
    app.router.add_post("/{path:.*}", got.handle)
    async with serve(app) as base:
        yield got, base
        got.release.set()


def _channels(base: str, **delivery: Any) -> dict[str, Any]:
    return {
        "alerts": {
            "backoff": 0.01, **delivery,
            "channel": [
                {"type": "webhook", "url": f"{base}/json"},
                {"type": "slack", "url": f"{base}/slack/T000/B000/slacktoken123"},
                {"type": "dingtalk", "url": f"{base}/ding?access_token=dingtoken123"},
                {"type": "wecom", "url": f"{base}/wecom?key=wecomkey123"},
            ],
        }
    }  # fmt: skip


async def test_each_webhook_gets_its_payload(receiver: tuple[Receiver, str]) -> None:
    got, base = receiver
    alerter = load_alerts(_channels(base))
    alerter.notify(ALERT)
    await alerter.close()
    bodies = {path.split("/")[1]: body for path, body in got.posts}
    expected = {"kind": "monitor_failed", "title": ALERT.title, "text": ALERT.text, "fields": ALERT.fields}
    assert bodies["json"] == expected
    assert bodies["slack"]["text"].startswith("price coverage fell") and bodies["slack"]["blocks"]
    assert bodies["ding"]["msgtype"] == "markdown" and "**spider**: shop" in bodies["ding"]["markdown"]["text"]
    assert bodies["wecom"] == {"msgtype": "markdown", "markdown": {"content": ALERT.markdown()}}


async def test_a_failing_receiver_is_retried(receiver: tuple[Receiver, str], caplog: pytest.LogCaptureFixture) -> None:
    got, base = receiver
    got.fail = 2
    alerter = load_alerts({"backoff": 0.01, "channel": [{"type": "slack", "url": f"{base}/slack/T/B/slacktoken123"}]})
    with caplog.at_level(logging.WARNING):
        alerter.notify(ALERT)
        await alerter.close()
    assert len(got.posts) == 1 and alerter.sent == 1 and alerter.failed == 0
    assert "retrying" in caplog.text and "slacktoken123" not in caplog.text


async def test_the_rate_limit_summarises_the_rest(receiver: tuple[Receiver, str]) -> None:
    got, base = receiver
    alerter = load_alerts({"rate_limit": 2, "rate_window": 3600, "channel": [{"type": "webhook", "url": f"{base}/j"}]})
    for i in range(6):
        alerter.notify(Alert("job_failed", f"job {i} failed", ""))
    await alerter.close()
    titles = [body["title"] for _, body in got.posts]
    assert titles == ["job 0 failed", "job 1 failed", "4 alerts held back by the rate limit"]
    assert "job_failed: job 5 failed" in got.posts[-1][1]["text"]


async def test_a_hanging_receiver_does_not_block_the_caller(receiver: tuple[Receiver, str]) -> None:
    got, base = receiver
    got.hang = True
    alerter = load_alerts({"queue": 3, "drain": 0.2, "channel": [{"type": "webhook", "url": f"{base}/j"}]})
    for i in range(10):  # returns at once each time: the sending waits in the alerter's task
        alerter.notify(Alert("job_failed", f"job {i}", ""))
    assert alerter.dropped >= 6  # the queue is bounded
    await alerter.close()  # bounded too: the receiver still hangs
    assert got.posts == []


async def test_secrets_in_urls_are_never_logged(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as sock:  # a closed port: every try fails
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HOOK", f"http://127.0.0.1:{port}/hook?access_token=tokentoken42")
    alerter = load_alerts({"retries": 1, "backoff": 0, "channel": [{"type": "dingtalk", "url_env": "HOOK"}]})
    assert "tokentoken42" not in repr(alerter.channels)
    with caplog.at_level(logging.WARNING):
        alerter.notify(ALERT)
        await alerter.close()
    assert alerter.failed == 1 and "failed after 2 tries" in caplog.text and "tokentoken42" not in caplog.text


class Mailbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((session.ssl is not None, envelope))
        return "250 OK"


@pytest.fixture
def smtp(tmp_path: Path) -> Any:
    cert = tmp_path / "tls"
    cert.mkdir()
    context: ssl.SSLContext = self_signed(cert)
    box = Mailbox()
    auth: dict[str, str] = {}

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
        from aiosmtpd.smtp import AuthResult

        auth["user"], auth["password"] = data.login.decode(), data.password.decode()
        return AuthResult(success=data.password == b"smtp-secret-pw")

    with socket.socket() as sock:  # aiosmtpd's controller needs its port given
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    controller = Controller(
        box, hostname="127.0.0.1", port=port, tls_context=context, require_starttls=True, authenticator=authenticate,
        auth_require_tls=True,
    )  # fmt: skip
    controller.start()
    try:
        yield box, port, str(cert / "cert.pem"), auth
    finally:
        controller.stop()


async def test_email_over_starttls(smtp: Any, caplog: pytest.LogCaptureFixture) -> None:
    box, port, cafile, auth = smtp
    channel = {
        "type": "email", "host": "127.0.0.1", "port": port, "cafile": cafile, "user": "eclaw",
        "password": "smtp-secret-pw", "from": "eclaw@example.test", "to": ["ops@example.test"],
    }  # fmt: skip
    alerter = load_alerts({"channel": [channel]})
    alerter.notify(Alert("job_failed", ALERT.title, "login smtp-secret-pw refused", ALERT.fields))
    await alerter.close()
    await until(lambda: len(box.messages) == 1)
    tls, envelope = box.messages[0]
    message = message_from_bytes(envelope.content)
    assert tls and envelope.rcpt_tos == ["ops@example.test"] and message["Subject"] == ALERT.title
    assert message.get_payload().splitlines() == ["login *** refused", "spider: shop"]
    assert auth == {"user": "eclaw", "password": "smtp-secret-pw"}
    assert "smtp-secret-pw" not in repr(alerter) + repr(alerter.channels)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"channel": [{"type": "pager"}]}, "type must be one of"),
        ({"channel": [{"type": "slack"}]}, "url \\(or url_env\\) is required"),
        ({"channel": [{"type": "email", "host": "smtp.example.test"}]}, "email needs host, from and to"),
        ({"retrys": 2}, "unknown \\[alerts\\] keys"),
        ({"channel": [{"type": "slack", "url_env": "ECLAW_NO_SUCH_VARIABLE"}]}, "ECLAW_NO_SUCH_VARIABLE is not set"),
    ],
)
async def test_bad_alert_config_is_one_clear_error(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_alerts(table)
