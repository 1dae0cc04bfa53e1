"""Types the HTTP values share: a callback, a request's options, and what a page offers to build requests.

They stand apart so that the modules using them (requests, responses, forms) need not import each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypedDict

__all__ = ["Callback", "Page", "RequestOptions"]

Callback = Callable[..., Any]


class RequestOptions(TypedDict, total=False):
    """What ``Request(...)`` takes besides the URL, method and body."""

    callback: Callback | None
    errback: Callback | None
    headers: dict[str, str]
    meta: dict[str, Any]
    priority: int
    cb_kwargs: dict[str, Any]
    dont_filter: bool
    cookies: Mapping[str, str]
    render: bool


class Page(Protocol):
    """What a request is built from (a form submitted): a downloaded page, :class:`eclaw.http.Response`."""

    @property
    def url(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def encoding(self) -> str: ...

    def urljoin(self, url: str) -> str: ...
