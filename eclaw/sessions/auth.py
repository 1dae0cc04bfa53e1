"""HTTP basic auth per origin: credentials sent to their own scheme, host and port only, never logged."""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping, Sequence
from urllib.parse import unquote, urlsplit

from eclaw.exceptions import ConfigError
from eclaw.http.urls import redact_url
from eclaw.security.scope import downgraded, origin

__all__ = ["HostAuth"]

logger = logging.getLogger(__name__)


class HostAuth:
    """``Authorization: Basic ...`` headers bound to an origin.

    From the ``http_auth`` setting (``user:password@host[:port]`` or
    ``scheme://user:password@host[:port]``, comma-separated; percent-escape an ``@``, ``:`` or
    ``,`` in a name or password) and the spider's ``http_auth`` attribute (``{"host": ("user",
    "password")}``, keys as the setting's hosts, e.g. ``"https://host:8443"``; it wins). An entry
    with a scheme goes to that scheme, host and port only (the scheme's default port if none);
    without a scheme, to http and https of that host and port (any port if none). Never to a
    subdomain, and never over http once the request's hops were https. Its ``repr`` names hosts only.
    """

    def __init__(self, setting: str = "", spider: Mapping[str, tuple[str, str]] | None = None) -> None:
        self._headers: dict[tuple[str, str, int], str] = {}  # (scheme or "", host, port or 0) -> header
        for where, (user, password) in [*_parse_setting(setting), *_check_spider(spider or {})]:
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self._headers[_binding(where)] = f"Basic {token}"

    def __repr__(self) -> str:
        return f"HostAuth(hosts={sorted(map(_shown, self._headers))})"

    def __bool__(self) -> bool:
        return bool(self._headers)

    def header(self, url: str, chain: Sequence[str] = ()) -> str | None:
        """The ``Authorization`` value for ``url``, a hop after the URLs of ``chain``, or ``None``: the
        entry of its scheme, host and port, else of its host and port, else of its host alone."""
        scheme, host, port = origin(url)
        get = self._headers.get
        found = get((scheme, host, port)) or get(("", host, port)) or get(("", host, 0))
        if found and downgraded(chain, url):
            logger.debug("http_auth not sent to %s: https to http", redact_url(url))
            return None
        return found

    def added(self, headers: Mapping[str, str], url: str, chain: Sequence[str] = ()) -> Mapping[str, str]:
        """``headers`` of a hop to ``url`` after ``chain`` (the request's own, scoped already) with the
        ``Authorization`` of :meth:`header`, unless they carry one of their own: that one wins."""
        if not self._headers or any(name.lower() == "authorization" for name in headers):
            return headers
        found = self.header(url, chain)
        return {**headers, "Authorization": found} if found else headers


def _binding(where: str) -> tuple[str, str, int]:
    """What an entry's ``[scheme://]host[:port]`` binds to (see :class:`HostAuth`)."""
    where = where.strip().lower()
    if "://" in where:
        return origin(where)
    parts = urlsplit(f"//{where}")
    try:
        port = parts.port or 0
    except ValueError:
        port = -1  # no URL has it: the entry binds to nothing
    return "", parts.hostname or "", port


def _shown(binding: tuple[str, str, int]) -> str:
    scheme, host, port = binding
    return f"{scheme}://" * bool(scheme) + host + f":{port}" * bool(port)


def _parse_setting(value: str) -> list[tuple[str, tuple[str, str]]]:
    """``user:password@host`` entries; errors name the entry's place, never its password."""
    found = []
    for number, entry in enumerate((e.strip() for e in value.split(",")), start=1):
        if not entry:
            continue
        scheme, slashes, entry = entry.rpartition("://") if "://" in entry else ("", "", entry)
        userinfo, at, host = entry.rpartition("@")
        user, colon, password = userinfo.partition(":")
        bad_scheme = slashes and scheme.lower() not in ("http", "https")
        if not at or not colon or not user or not host or "/" in host or bad_scheme:
            raise ConfigError(f"setting 'http_auth': entry {number} must be USER:PASSWORD@HOST")
        found.append((f"{scheme}{slashes}{host.strip()}", (unquote(user), unquote(password))))
    return found


def _check_spider(value: Mapping[str, tuple[str, str]]) -> list[tuple[str, tuple[str, str]]]:
    if not isinstance(value, Mapping):
        raise ConfigError("spider attribute http_auth must be a dict {host: (user, password)}")
    found = []
    for host, pair in value.items():
        if (
            not isinstance(host, str)
            or "/" in host.partition("://")[2 if "://" in host else 0]
            or not isinstance(pair, tuple | list)
            or len(pair) != 2
            or not all(isinstance(part, str) for part in pair)
        ):
            raise ConfigError(f"spider attribute http_auth: {host!r} must map a host to (user, password)")
        found.append((host.strip(), (pair[0], pair[1])))
    return found
