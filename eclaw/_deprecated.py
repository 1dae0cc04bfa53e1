"""Old names kept for one release after a rename (issue 41: one word per concept), each warning on use.

A module whose names were renamed in place ends with ``__getattr__ = renamed(__name__, {"Old": "New"})``;
a module that moved leaves a stub at its old path whose ``__getattr__ = moved(__name__, "eclaw.new.path")``
hands out the new module's names (old spellings from :data:`RENAMED` too). Nothing is imported until an
old name is used, and every use warns with :class:`DeprecationWarning` naming the new one.
"""

# eclaw-rename: keep file (this module spells the old names on purpose)

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ARGUMENTS", "RENAMED", "SETTINGS", "moved", "renamed", "renamed_arguments", "renamed_setting"]

RENAMED: Mapping[str, str] = {
    "Downloader": "Fetcher",
    "HttpDownloader": "PlainFetcher",
    "ImpersonateDownloader": "ImpersonateFetcher",
    "MockDownloader": "MockFetcher",
    "Scheduler": "Frontier",
    "DefaultScheduler": "DefaultFrontier",
    "RedisScheduler": "RedisFrontier",
    "PartScheduler": "PartFrontier",
}
"""Old class names and their new ones (``eclaw 0.2``; the old ones go in the next release)."""


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated, use {new} (the old name goes in the next release)", DeprecationWarning, 3)


def renamed(module: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that answers each old name in ``names`` with its new one, warning."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        _warn(f"{module}.{name}", f"{module}.{names[name]}")
        return getattr(sys.modules[module], names[name])

    return __getattr__


def moved(old: str, new: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the stub left at ``old``: every name of ``new`` (under its old
    spelling too), warning."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):  # import machinery and tools probing the stub (__path__, __wrapped__, ...)
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        target = importlib.import_module(new)
        current = RENAMED.get(name, name)
        if not hasattr(target, current):
            raise AttributeError(f"module {old!r} has no attribute {name!r} (it moved to {new})")
        _warn(f"{old}.{name}", f"{new}.{current}")
        return getattr(target, current)

    return __getattr__


SETTINGS: Mapping[str, str] = {"scheduler_url": "frontier_url"}
"""Old setting names (``-s``, ``ECLAW_*``, ``custom_settings``, ``Settings.replace``) and their new ones."""

ARGUMENTS: Mapping[str, str] = {"scheduler": "frontier", "downloader": "fetcher"}
"""Old keyword arguments of :class:`eclaw.Engine` and their new ones."""


def renamed_setting(name: str) -> str:
    """``name``, or the new name of an old setting (warning)."""
    if name in SETTINGS:
        _warn(f"setting {name!r}", repr(SETTINGS[name]))
        return SETTINGS[name]
    return name


def renamed_arguments(where: str, given: Mapping[str, Any], **current: Any) -> tuple[Any, ...]:
    """The values of ``current`` (in order), each replaced by its old-named argument in ``given`` if
    there (warning); any other name in ``given`` is a ``TypeError``, as Python's own."""
    values = dict(current)
    for name, value in given.items():
        if name not in ARGUMENTS or ARGUMENTS[name] not in values:
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
        _warn(f"{where}({name}=...)", f"{where}({ARGUMENTS[name]}=...)")
        values[ARGUMENTS[name]] = value
    return tuple(values.values())
