"""The settings' values checked beyond their types: numeric bounds, per-host maps, and the texts that have
a form of their own. Each failure is one :class:`~eclaw.exceptions.ConfigError` naming the setting."""

from __future__ import annotations

import re
import typing
from typing import Any

from eclaw.exceptions import ConfigError
from eclaw.setting_values import BROWSER_RESOURCE_TYPES, host_map

__all__ = ["check_values"]


def check_values(settings: Any) -> None:
    """Raise :class:`ConfigError` for the first value of ``settings`` (a :class:`~eclaw.settings.Settings`,
    which imports this module: not named as a type here) out of its bounds or not in its form."""
    for names, allowed, rule in _BOUNDS:
        for name in names:
            if not allowed(value := getattr(settings, name)):
                raise ConfigError(f"setting {name!r} {rule}, got {value!r}")
    host_map(settings.host_concurrency, "host_concurrency", int)
    host_map(settings.host_delay, "host_delay", float)
    _check_texts(settings)


_BOUNDS: tuple[tuple[tuple[str, ...], typing.Callable[[float], bool], str], ...] = (
    (
        ("concurrency", "concurrency_per_domain", "max_response_size", "dupefilter_capacity", "max_url_length",
         "checkpoint_requests", "dns_max_in_flight", "browser_pages", "browser_contexts"),
        lambda value: value >= 1,
        "must be at least 1",
    ),
    (
        ("download_delay", "max_redirects", "max_depth", "shutdown_timeout", "retries", "dns_retries",
         "dns_cache_ttl_min", "dns_negative_ttl", "output_batch_items", "output_batch_bytes", "quality_count_ratio",
         "frontier_memory", "meta_refresh_max_delay", "sessions", "robots_max_bytes", "sitemap_max_depth",
         "sitemap_max_urls", "max_links_per_page", "read_timeout", "browser_context_pages", "browser_xhr_bytes",
         "browser_screenshots_max"),
        lambda value: value >= 0,
        "must not be negative",
    ),
    (
        ("max_pages", "max_items", "max_seconds", "max_errors", "max_idle_items_seconds", "max_memory_mb"),
        lambda value: value >= 0,
        "must not be negative (0: no limit)",
    ),
    (("snapshots_max", "snapshots_max_bytes"), lambda value: value >= 0, "must not be negative (0: no snapshots)"),
    (
        ("connect_timeout", "timeout", "checkpoint_interval", "lease_timeout", "ladder_quiet", "browser_timeout"),
        lambda value: value > 0,
        "must be positive",
    ),
)  # fmt: skip
"""The numeric settings' bounds: (names, the test a value passes, the rule its error states)."""


def _check_texts(settings: Any) -> None:
    """The settings whose text has a form of its own: a pattern, credentials, resource types."""
    try:
        re.compile(settings.ladder_ban_pattern)
    except re.error as exc:
        raise ConfigError(f"setting 'ladder_ban_pattern' is not a regular expression: {exc}") from None
    for number, entry in enumerate(e.strip() for e in settings.http_auth.split(",")):
        if entry and not re.fullmatch(r"[^:@]+:.*@[^@/]+", entry):  # the message names no password
            raise ConfigError(f"setting 'http_auth': entry {number + 1} must be USER:PASSWORD@HOST")
    if not 0 < settings.dupefilter_error_rate < 1:
        raise ConfigError(
            f"setting 'dupefilter_error_rate' must be between 0 and 1, got {settings.dupefilter_error_rate!r}"
        )
    kinds = {kind.strip() for kind in settings.browser_block.split(",") if kind.strip()}
    unknown = sorted(kinds - BROWSER_RESOURCE_TYPES)
    if unknown:
        known = ", ".join(sorted(BROWSER_RESOURCE_TYPES))
        raise ConfigError(f"setting 'browser_block': unknown resource type {unknown[0]!r} (known: {known})")
