"""``load_alerts``: the ``[alerts]`` table of a TOML file (or a mapping) made into an :class:`Alerter`.

Secrets can stay out of the file: ``url_env`` / ``password_env`` name an environment variable that
holds the webhook URL / SMTP password. Either way the alerter's redactor learns them, so they never
appear in a log line.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eclaw.alerts.alerter import Alerter, Delivery
from eclaw.alerts.channels import PAYLOADS, Channel, EmailChannel, SmtpServer, WebhookChannel
from eclaw.exceptions import ConfigError
from eclaw.security.redact import Redactor

__all__ = ["load_alerts", "read_toml"]

_DELIVERY = {"retries": int, "backoff": float, "rate_limit": int, "rate_window": float, "queue": int, "drain": float}
_TYPES = (*PAYLOADS, "email")


def read_toml(path: str | Path) -> dict[str, Any]:
    """The TOML file at ``path`` (a clear :class:`ConfigError` if missing or malformed)."""
    try:
        with open(path, "rb") as file:
            return tomllib.load(file)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None


def load_alerts(source: str | Path | Mapping[str, Any], redactor: Redactor | None = None) -> Alerter:
    """An :class:`Alerter` from a TOML file's ``[alerts]`` table, or from a mapping (that table, or a
    mapping holding it under ``"alerts"``)."""
    where = str(source) if isinstance(source, str | Path) else "alerts"
    data = read_toml(source) if isinstance(source, str | Path) else dict(source)
    table = data.get("alerts", data)
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: [alerts] must be a table")
    unknown = set(table) - set(_DELIVERY) - {"channel"}
    if unknown:
        raise ConfigError(f"{where}: unknown [alerts] keys {sorted(unknown)}; known: {sorted([*_DELIVERY, 'channel'])}")
    try:
        delivery = Delivery(**{key: kind(table[key]) for key, kind in _DELIVERY.items() if key in table})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: [alerts]: {exc}") from None
    if delivery.retries < 0 or delivery.rate_limit < 1 or delivery.queue < 1 or delivery.backoff < 0:
        raise ConfigError(f"{where}: [alerts]: retries/backoff must be >= 0, rate_limit and queue >= 1")
    redactor = redactor or Redactor()
    entries = table.get("channel", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{where}: alerts.channel must be an array of tables ([[alerts.channel]])")
    channels = [_channel(entry, i, where, redactor) for i, entry in enumerate(entries)]
    return Alerter(channels, delivery, redactor)


def _channel(entry: Any, index: int, where: str, redactor: Redactor) -> Channel:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: alerts.channel {index} must be a table")
    kind = entry.get("type")
    if kind not in _TYPES:
        raise ConfigError(f"{where}: alerts.channel {index}: type must be one of {list(_TYPES)}, not {kind!r}")
    name = str(entry.get("name") or f"{kind}{index}")
    if kind != "email":
        url = _secret(entry, "url", where, name, required=True)
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}: alerts channel {name}: url must be http(s)")
        redactor.learn(url, url.partition("?")[2], url.rpartition("/")[2])
        return WebhookChannel(name, kind, url, timeout=float(entry.get("timeout", 10.0)))
    password = _secret(entry, "password", where, name, required=False)
    redactor.learn(password)
    to = entry.get("to")
    if isinstance(to, str):
        to = [to]
    if not entry.get("host") or not entry.get("from") or not to:
        raise ConfigError(f"{where}: alerts channel {name}: email needs host, from and to")
    starttls = bool(entry.get("starttls", True))
    if not starttls and entry["host"] not in ("127.0.0.1", "localhost", "::1"):
        raise ConfigError(f"{where}: alerts channel {name}: starttls = false only for a local SMTP server")
    server = SmtpServer(
        str(entry["host"]), int(entry.get("port", 587)), str(entry.get("user", "")), password, starttls,
        str(entry.get("cafile", "")), float(entry.get("timeout", 10.0)),
    )  # fmt: skip
    return EmailChannel(name, server, str(entry["from"]), [str(t) for t in to])


def _secret(entry: Mapping[str, Any], key: str, where: str, name: str, *, required: bool) -> str:
    """``entry[key]``, or the environment variable ``entry[key + "_env"]`` names."""
    env = entry.get(f"{key}_env")
    if env:
        value = os.environ.get(str(env), "")
        if not value:
            raise ConfigError(f"{where}: alerts channel {name}: environment variable {env} is not set")
        return value
    value = str(entry.get(key, ""))
    if required and not value:
        raise ConfigError(f"{where}: alerts channel {name}: {key} (or {key}_env) is required")
    return value
