"""Types the HTTP values share: a callback, a request's options, what a page offers to build requests,
and where a streamed body goes.

They stand apart so that the modules using them (requests, responses, forms) need not import each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypedDict

__all__ = ["COMPLETES", "STREAM_TO", "BodySink", "Callback", "Page", "RequestOptions"]

COMPLETES = "completes"  # request meta: its callbacks only finish an item a pipeline holds (never held at a checkpoint)
STREAM_TO = "stream_to"  # the request meta key of a BodySink: the body goes there, not into memory

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


class BodySink(Protocol):
    """Where a streamed response body goes (``meta["stream_to"]``), chunk by chunk as it arrives,
    for a 2xx response; ``response.body`` is then empty. ``meta["max_response_size"]`` (else the
    setting) still bounds it."""

    async def begin(self) -> None:
        """A new attempt starts (a retry): forget what the last one wrote."""

    async def write(self, data: bytes) -> None:
        """The next chunk of the body."""
