"""HTTP basic auth per host: credentials sent to their own host only, never logged."""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from eclaw.exceptions import ConfigError

__all__ = ["HostAuth"]

logger = logging.getLogger(__name__)


class HostAuth:
    """``Authorization: Basic ...`` headers by host (``host`` or ``host:port``).

    From the ``http_auth`` setting (``user:password@host,...``; percent-escape an ``@``,
    ``:`` or ``,`` in a name or password) and the spider's ``http_auth`` attribute
    (``{"host": ("user", "password")}``, which wins). A host matches exactly: never a
    subdomain, never another host a redirect leads to. Its ``repr`` names hosts only.
    """

    def __init__(self, setting: str = "", spider: Mapping[str, tuple[str, str]] | None = None) -> None:
        self._headers: dict[str, str] = {}
        for host, (user, password) in [*_parse_setting(setting), *_check_spider(spider or {})]:
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self._headers[host.lower()] = f"Basic {token}"

    def __repr__(self) -> str:
        return f"HostAuth(hosts={sorted(self._headers)})"

    def __bool__(self) -> bool:
        return bool(self._headers)

    def header(self, url: str) -> str | None:
        """The ``Authorization`` value for ``url`` (its host with its port, else its host), or ``None``."""
        try:
            parts = urlsplit(url)
            host, port = (parts.hostname or ""), parts.port
        except ValueError:
            return None
        return self._headers.get(f"{host}:{port}") or self._headers.get(host) if port else self._headers.get(host)


def _parse_setting(value: str) -> list[tuple[str, tuple[str, str]]]:
    """``user:password@host`` entries; errors name the entry's place, never its password."""
    found = []
    for number, entry in enumerate((e.strip() for e in value.split(",")), start=1):
        if not entry:
            continue
        userinfo, at, host = entry.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if not at or not colon or not user or not host or "/" in host:
            raise ConfigError(f"setting 'http_auth': entry {number} must be USER:PASSWORD@HOST")
        found.append((host.strip(), (unquote(user), unquote(password))))
    return found


def _check_spider(value: Mapping[str, tuple[str, str]]) -> list[tuple[str, tuple[str, str]]]:
    if not isinstance(value, Mapping):
        raise ConfigError("spider attribute http_auth must be a dict {host: (user, password)}")
    found = []
    for host, pair in value.items():
        if (
            not isinstance(host, str)
            or "/" in host
            or not isinstance(pair, tuple | list)
            or len(pair) != 2
            or not all(isinstance(part, str) for part in pair)
        ):
            raise ConfigError(f"spider attribute http_auth: {host!r} must map a host to (user, password)")
        found.append((host.strip(), (pair[0], pair[1])))
    return found
