"""A saved session for ``eclaw fetch``, ``parse`` and ``shell``: the cookie jars of a paused crawl's
``--state`` folder, or a cookie file (a browser's Netscape ``cookies.txt``, eclaw's own JSON).

Both come back as what :meth:`eclaw.sessions.jars.CookieJars.restore` reads, so a one-off
download is sent the cookies a crawl would send.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from http.cookiejar import Cookie, LoadError, MozillaCookieJar
from pathlib import Path
from typing import Any

from eclaw.exceptions import ConfigError

__all__ = ["file_cookies", "state_cookies"]


def state_cookies(directory: str | Path) -> dict[str, Any]:
    """The cookie jars saved in a crawl's ``--state`` folder (read only: a running crawl may hold it).

    A crawl keeps its jars while it can resume (paused, or killed); a finished one keeps none.
    """
    path = Path(directory) / "state.sqlite"
    if not path.is_file():
        raise ConfigError(f"--state {directory}: no saved crawl there (no state.sqlite)")
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('status', 'outputs')").fetchall())
        saved = json.loads(meta.get("outputs", "{}")).get("cookies")
    except (sqlite3.Error, ValueError, AttributeError) as exc:
        raise ConfigError(f"--state {directory}: cannot read its saved crawl ({exc})") from None
    if not saved or not saved.get("jars"):
        why = "it finished, and a finished crawl keeps no cookie" if meta.get("status") == "finished" else "none saved"
        raise ConfigError(f"--state {directory}: no cookies ({why}); pause a crawl (Ctrl-C) to keep its login")
    return _one_default(saved)


def file_cookies(file: str | Path) -> dict[str, Any]:
    """The cookies of ``file``: Netscape ``cookies.txt`` (what browser extensions and curl write), a
    JSON list of cookies (``name``, ``value``, ``domain``, ``path``, ``secure``, ``expires``; also
    under ``"cookies"``, as Playwright's ``storage_state`` writes them), or eclaw's saved jars
    (``{"jars": ...}``, as ``--state`` keeps them)."""
    path = Path(file)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--cookies {file}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    if text.lstrip()[:1] in ("{", "["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--cookies {file}: not JSON: {exc.msg} (line {exc.lineno})") from None
        if isinstance(data, Mapping) and "jars" in data:
            return _one_default(dict(data))
        listed = data.get("cookies") if isinstance(data, Mapping) else data
        if not isinstance(listed, list):
            raise ConfigError(f"--cookies {file}: expected a list of cookies, or an object with 'cookies' or 'jars'")
        cookies = [_from_dict(entry, file) for entry in listed]
    else:
        jar = MozillaCookieJar()
        try:
            jar.load(str(path), ignore_discard=True, ignore_expires=True)
        except (LoadError, OSError) as exc:
            raise ConfigError(f"--cookies {file}: not a Netscape cookies.txt ({exc})") from None
        cookies = [_session_if_zero(cookie) for cookie in jar if not cookie.is_expired() or not cookie.expires]
    if not cookies:
        raise ConfigError(f"--cookies {file}: no cookies in it")
    return {"jars": [[None, [_restorable(cookie) for cookie in cookies]]]}


def _one_default(saved: dict[str, Any]) -> dict[str, Any]:
    """A single jar is the default one too (a spider that logs in with ``meta["cookiejar"]`` once)."""
    jars = saved.get("jars")
    if not isinstance(jars, list):
        raise ConfigError("saved cookies: 'jars' is not a list")
    if len(jars) == 1:
        return {"jars": [[None, jars[0][1]]]}
    return saved


def _from_dict(entry: object, file: str | Path) -> Cookie:
    """A cookie of a JSON list (a dot before its domain, or ``"hostOnly": false``: for its subdomains too)."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str) or "value" not in entry:
        raise ConfigError(f"--cookies {file}: each cookie needs a name and a value, got {entry!r:.80}")
    domain = str(entry.get("domain") or "")
    if not domain:
        raise ConfigError(f"--cookies {file}: cookie {entry['name']!r} has no domain")
    wide = domain.startswith(".") or entry.get("hostOnly") is False
    if wide and not domain.startswith("."):
        domain = "." + domain
    expires = entry.get("expires", entry.get("expirationDate"))
    expires = int(expires) if isinstance(expires, int | float) and expires > 0 else None
    rest: dict[str, Any] = {"HttpOnly": None} if entry.get("httpOnly") else {}
    if entry.get("sameSite"):
        rest["SameSite"] = str(entry["sameSite"])
    return Cookie(
        0, entry["name"], str(entry["value"]), None, False, domain, wide, wide, str(entry.get("path") or "/"),
        True, bool(entry.get("secure")), expires, expires is None, None, None, rest,
    )  # fmt: skip


def _session_if_zero(cookie: Cookie) -> Cookie:
    """curl and browser extensions write a session cookie's expiry as 0."""
    if not cookie.expires:
        cookie.expires, cookie.discard = None, True
    return cookie


def _restorable(cookie: Cookie) -> dict[str, Any]:
    """``cookie`` as ``CookieJars.restore`` reads it; a dotless host-only domain named as the jars name it."""
    fields = dict(vars(cookie))
    fields["rest"] = dict(fields.pop("_rest", None) or {})
    domain = fields["domain"]
    if not fields["domain_specified"] and "." not in domain:
        fields["domain"] = domain + ".local"  # http.cookiejar's name of a dotless host (localhost)
    return fields
