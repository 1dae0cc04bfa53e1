"""Which request headers are credentials: those always treated so, and those a setting adds."""

from __future__ import annotations

from functools import lru_cache

__all__ = ["ALWAYS_SENSITIVE", "sensitive_headers"]

ALWAYS_SENSITIVE = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "x-auth-token", "api-key"})


@lru_cache(maxsize=8)
def sensitive_headers(extra: str = "") -> frozenset[str]:
    """The lower-case names of the sensitive headers: :data:`ALWAYS_SENSITIVE` and those of the
    comma-separated ``extra`` (the ``sensitive_headers`` setting)."""
    return ALWAYS_SENSITIVE | {name.strip().lower() for name in extra.split(",") if name.strip()}
