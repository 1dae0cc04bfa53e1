"""Setting values from text and checked by type: the parsing half of :mod:`eclaw.settings`
(it knows types, not the settings themselves)."""

from __future__ import annotations

import typing
from typing import Any, Literal

from eclaw.exceptions import ConfigError

__all__ = ["BROWSER_RESOURCE_TYPES", "describe", "host_map", "instance_of", "parse_as"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def host_map(text: str, name: str, kind: type[int] | type[float]) -> dict[str, float]:
    """``"a.example=2,b.example=1.5"`` as ``{host: number}``; a one-line error naming what is wrong."""
    result: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        host, sep, value = part.partition("=")
        host = host.strip().lower()
        try:
            number = kind(value.strip()) if sep and host else None
        except ValueError:
            number = None
        if number is None or number < 0 or (kind is int and number < 1):
            raise ConfigError(f"setting {name!r}: expected host=number pairs, got {part!r}")
        result[host] = number
    return result


# The browser fetcher's settings. Resource types as Chromium (through Playwright) names them;
# a page's own document is never blocked, so "document" is not one to give.
BROWSER_RESOURCE_TYPES = frozenset(
    {"stylesheet", "image", "media", "font", "script", "texttrack", "xhr", "fetch", "eventsource", "websocket"}
    | {"manifest", "other"}
)


def parse_as(kind: Any, name: str, raw: str) -> Any:
    """Parse the string ``raw`` (CLI or environment) as a value of type ``kind`` for setting ``name``."""
    text = raw.strip()
    try:
        if kind is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError
        if kind is int:
            return int(text.replace("_", ""))
        if kind is float:
            return float(text)
        if typing.get_origin(kind) is Literal:
            for option in typing.get_args(kind):
                if text.lower() == str(option).lower():
                    return option
            raise ValueError
    except ValueError:
        raise ConfigError(f"setting {name!r} must be {describe(kind)}, got {raw!r}") from None
    return text


def instance_of(value: Any, kind: Any) -> bool:
    if typing.get_origin(kind) is Literal:
        return value in typing.get_args(kind)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def describe(kind: Any) -> str:
    if typing.get_origin(kind) is Literal:
        return "one of " + ", ".join(repr(o) for o in typing.get_args(kind))
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(kind, str(kind))
