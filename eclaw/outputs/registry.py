"""Plug-ins by entry point: formats, compressions, destinations, fetchers, discovery sources.

Each :class:`PluginGroup` reads its entry points once (``importlib.metadata``, cached) and loads
one only when its name is used, so start-up stays cheap. eclaw's own plug-ins are entry points of
its distribution too (``pyproject.toml``); ``builtins`` names them again for a source checkout
whose installed metadata predates them (the same ``module:attribute`` values).
An unknown name is a :class:`~eclaw.exceptions.ConfigError` listing the known ones.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Mapping
from typing import Any

from eclaw.exceptions import ConfigError

__all__ = ["COMPRESSIONS", "DESTINATIONS", "DISCOVERY_SOURCES", "FETCHERS", "FORMATS", "PluginGroup"]


class PluginGroup:
    """The plug-ins of one entry-point group, by name."""

    def __init__(self, group: str, what: str, builtins: Mapping[str, str]) -> None:
        self.group, self.what = group, what
        self._builtins = dict(builtins)
        self._points: dict[str, str] | None = None
        self._loaded: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"PluginGroup({self.group!r})"

    def _entry_points(self) -> dict[str, str]:
        if self._points is None:
            found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=self.group)}
            self._points = self._builtins | found
        return self._points

    def refresh(self) -> None:
        """Read the entry points again (after ``sys.path`` changed: a plug-in added at run time)."""
        self._points = None
        self._loaded.clear()

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._entry_points())

    def __contains__(self, name: object) -> bool:
        return name in self._entry_points()

    def get(self, name: str) -> Any:
        """The plug-in ``name`` (loaded now, once); ConfigError naming the known ones if there is none."""
        if name in self._loaded:
            return self._loaded[name]
        value = self._entry_points().get(name)
        if value is None:
            raise ConfigError(f"unknown {self.what} {name!r} (known: {', '.join(self.names())})")
        module, _, attribute = value.partition(":")
        try:
            obj: Any = importlib.import_module(module.strip())
            for part in attribute.strip().split(".") if attribute.strip() else ():
                obj = getattr(obj, part)
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(f"{self.what} {name!r} ({value}) cannot be loaded: {type(exc).__name__}: {exc}") from None
        self._loaded[name] = obj
        return obj


FORMATS = PluginGroup(
    "eclaw.formats",
    "output format",
    {
        "jsonl": "eclaw.outputs.formats:JSONL",
        "json": "eclaw.outputs.formats:JSON",
        "csv": "eclaw.outputs.formats:CSV",
        "sqlite": "eclaw.outputs.formats:SQLITE",
        "parquet": "eclaw.outputs.formats:PARQUET",
    },
)
COMPRESSIONS = PluginGroup(
    "eclaw.compressions",
    "compression",
    {
        "gz": "eclaw.outputs.compression:GZIP",
        "zst": "eclaw.outputs.compression:ZSTD",
        "bz2": "eclaw.outputs.compression:BZ2",
        "xz": "eclaw.outputs.compression:XZ",
    },
)
DESTINATIONS = PluginGroup(
    "eclaw.destinations",
    "output destination (URL scheme)",
    {"file": "eclaw.outputs.local:FILES", "stdout": "eclaw.outputs.local:STDOUT"},
)
FETCHERS = PluginGroup(
    "eclaw.fetchers",
    "fetcher",
    {
        "plain": "eclaw.fetchers.plain:PlainFetcher",
        "impersonate": "eclaw.fetchers.impersonate:ImpersonateFetcher",
        "browser": "eclaw.fetchers.browser:BrowserFetcher",
    },
)
DISCOVERY_SOURCES = PluginGroup("eclaw.discovery_sources", "discovery source", {"feeds": "eclaw.discovery.feeds:Feeds"})
