"""The Public Suffix List: which names anyone may register under (``com``, ``co.uk``,
``github.io``), for link rules (a page's registrable domain) and cookies (no cookie for a
whole suffix). The list is the one bundled with ``publicsuffixlist``: offline, no download."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

__all__ = ["is_public_suffix", "registered_domain"]


@lru_cache(maxsize=4096)
def registered_domain(host: str) -> str:
    """The registrable domain of ``host`` (``news.example.co.uk`` → ``example.co.uk``); an IP
    address or a bare name is its own domain."""
    if not host or host.replace(".", "").isdigit() or ":" in host or "." not in host:
        return host
    return str(_suffix_list().privatesuffix(host) or host)


@lru_cache(maxsize=4096)
def is_public_suffix(domain: str) -> bool:
    """Whether ``domain`` (lower-case, no leading dot) is a public suffix, its ICANN or private
    part alike (``com``, ``co.uk``, ``github.io``, ``herokuapp.com``); never an IP address."""
    if not domain or domain.replace(".", "").isdigit() or ":" in domain:
        return False
    return bool(_suffix_list().is_public(domain))


@lru_cache(maxsize=1)
def _suffix_list() -> Any:
    """The list (read-only data bundled with ``publicsuffixlist``; ~60 ms to load, once a process)."""
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()
