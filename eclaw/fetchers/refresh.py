"""``<meta http-equiv="refresh">``: a page that sends the browser elsewhere, followed like a redirect.

As in Scrapy, only the start of the page is looked at (its first 4096 bytes, where the
``<head>`` is), a refresh inside ``<script>`` or ``<noscript>`` is not one, and a refresh to
the page itself or after more than the ``meta_refresh_max_delay`` is not followed (the page
is kept as it is).
"""

from __future__ import annotations

from collections.abc import Mapping

from w3lib.html import get_meta_refresh

from eclaw.http import Response
from eclaw.http.urls import canonical_url

__all__ = ["refresh_target"]

_SCAN = 4096
# "refresh", "Refresh", "REFRESH": a cheap test before any decoding


def refresh_target(url: str, headers: Mapping[str, str], body: bytes, max_delay: float) -> str | None:
    """Where the page at ``url`` refreshes to (absolute), or ``None`` when it is not to be followed."""
    if body.find(b"efresh", 0, _SCAN) < 0 and body.find(b"EFRESH", 0, _SCAN) < 0:  # once a page: no generator
        return None
    content_type = headers.get("Content-Type", "").lower()
    if content_type and "html" not in content_type:
        return None
    page = Response(url, headers=headers, body=body)
    if not page.is_text:
        return None
    delay, target = get_meta_refresh(page.text[:_SCAN], url)
    if target is None or delay is None or delay > max_delay:
        return None
    if canonical_url(target) == canonical_url(url):
        return None
    return target
