"""The channels an alert goes to: webhooks (JSON, Slack, DingTalk, WeCom) and email (SMTP + STARTTLS).

A channel turns an :class:`Alert` into what its receiver expects and sends it once; retries and
rate limits are the :class:`~eclaw.alerts.alerter.Alerter`'s. Email uses the standard library's
``smtplib`` in a worker thread: STARTTLS and login are all it needs, and no dependency is added.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, Protocol

import aiohttp

from eclaw.security.redact import redact_url

__all__ = ["PAYLOADS", "Alert", "Channel", "EmailChannel", "WebhookChannel"]

_MAX_TEXT = 4000  # a receiver's message limit (Slack, DingTalk and WeCom all cut near 4 KB)


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert: ``kind`` (``"monitor_failed"``, ``"job_failed"``, ``"schedule_missed"``...),
    a one-line ``title``, a ``text`` and ``fields`` shown as ``name: value`` lines."""

    kind: str
    title: str
    text: str
    fields: dict[str, str] = field(default_factory=dict)

    def body(self) -> str:
        """The text and the fields, plain, bounded."""
        lines = [self.text, *(f"{k}: {v}" for k, v in self.fields.items())]
        return "\n".join(line for line in lines if line)[:_MAX_TEXT]

    def markdown(self) -> str:
        """Title, text and fields as Markdown (DingTalk, WeCom)."""
        lines = [f"### {self.title}", self.text, *(f"- **{k}**: {v}" for k, v in self.fields.items())]
        return "\n".join(line for line in lines if line)[:_MAX_TEXT]


class Channel(Protocol):
    """Sends one alert (raises on failure: the alerter retries)."""

    name: str

    async def send(self, alert: Alert) -> None: ...


def _json(alert: Alert) -> dict[str, Any]:
    return {"kind": alert.kind, "title": alert.title, "text": alert.text, "fields": alert.fields}


def _slack(alert: Alert) -> dict[str, Any]:
    fields = "\n".join(f"*{k}*: {v}" for k, v in alert.fields.items())
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": alert.title[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": (alert.text or alert.title)[:3000]}},
    ]
    if fields:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": fields[:3000]}})
    return {"text": f"{alert.title}\n{alert.body()}", "blocks": blocks}


def _dingtalk(alert: Alert) -> dict[str, Any]:
    return {"msgtype": "markdown", "markdown": {"title": alert.title, "text": alert.markdown()}}


def _wecom(alert: Alert) -> dict[str, Any]:
    return {"msgtype": "markdown", "markdown": {"content": alert.markdown()}}


PAYLOADS = {"webhook": _json, "slack": _slack, "dingtalk": _dingtalk, "wecom": _wecom}


class WebhookChannel:
    """POSTs the alert as JSON to ``url`` in the shape of ``kind`` (a key of :data:`PAYLOADS`).

    The URL often holds a token: its ``repr`` and errors show only the scheme and host."""

    def __init__(self, name: str, kind: str, url: str, *, timeout: float = 10.0) -> None:
        self.name, self.kind, self.url, self.timeout = name, kind, url, timeout
        self._payload = PAYLOADS[kind]

    def __repr__(self) -> str:
        return f"WebhookChannel({self.name!r}, {self.kind!r}, {_origin(self.url)!r})"

    async def send(self, alert: Alert) -> None:
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(self.url, json=self._payload(alert)) as response,
        ):
            await response.read()
            if response.status >= 300:
                raise OSError(f"{self.name}: {_origin(self.url)} answered HTTP {response.status}")


def _origin(url: str) -> str:
    """Scheme and host of ``url`` (its path and query may hold a token)."""
    scheme, _, rest = redact_url(url).partition("://")
    return f"{scheme}://{rest.split('/', 1)[0].split('?', 1)[0]}/..."


@dataclass(frozen=True, slots=True)
class SmtpServer:
    """Where and how to send email: STARTTLS unless ``starttls`` is false (then only on 127.0.0.1)."""

    host: str
    port: int = 587
    user: str = ""
    password: str = field(default="", repr=False)
    starttls: bool = True
    cafile: str = ""
    timeout: float = 10.0


class EmailChannel:
    """Sends the alert as a plain-text email from ``sender`` to ``to`` (``smtplib`` in a thread)."""

    def __init__(self, name: str, server: SmtpServer, sender: str, to: list[str]) -> None:
        self.name, self.server, self.sender, self.to = name, server, sender, to

    def __repr__(self) -> str:
        return f"EmailChannel({self.name!r}, {self.server.host}:{self.server.port}, to={self.to!r})"

    async def send(self, alert: Alert) -> None:
        message = EmailMessage()
        message["Subject"] = alert.title[:200]
        message["From"], message["To"] = self.sender, ", ".join(self.to)
        message.set_content(alert.body())
        await asyncio.to_thread(self._send, message)

    def _send(self, message: EmailMessage) -> None:
        server = self.server
        with smtplib.SMTP(server.host, server.port, timeout=server.timeout) as smtp:
            if server.starttls:
                context = ssl.create_default_context(cafile=server.cafile or None)
                smtp.starttls(context=context)
            if server.user:
                smtp.login(server.user, server.password)
            smtp.send_message(message)
