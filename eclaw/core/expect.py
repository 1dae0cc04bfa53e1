"""Which pages must yield items: a spider's ``expect_items``, or a request's ``meta["expect_items"]``.

A page whose callback is expected to yield items and yields none fails with the
reason ``no items`` (and a snapshot is saved): a selector that stopped matching
shows up as a failure, not as a quiet drop in the item count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eclaw.exceptions import ConfigError
from eclaw.frontier.serial import declared_callback
from eclaw.http import Request
from eclaw.spider import Spider

__all__ = ["ItemExpectations"]


class ItemExpectations:
    """The callbacks of ``spider`` that must yield items, checked to be its methods (looked up on its
    class, never as arbitrary attributes: :func:`~eclaw.frontier.serial.declared_callback`).

    ``meta["expect_items"]`` on a request (true or false) wins over the spider's list, so
    whatever builds requests (a link rule, a sitemap reader) can pass the expectation on.
    """

    def __init__(self, spider: Spider) -> None:
        names = spider.expect_items
        if isinstance(names, str):
            names = (names,)
        callbacks: set[Callable[..., Any]] = set()
        for name in names:
            callback = declared_callback(spider, str(name))
            if callback is None:
                raise ConfigError(f"spider {spider.name!r}: expect_items names {name!r}, which is not a method of it")
            callbacks.add(callback)
        self._callbacks = frozenset(callbacks)  # bound methods: equal when of the same spider and function
        self._default = "parse" in names

    def wanted(self, request: Request) -> bool:
        """Whether the page of ``request`` must yield at least one item (asked only of pages that yielded none)."""
        meta = request._meta  # most requests have none: don't make one
        if meta and "expect_items" in meta:
            return bool(meta["expect_items"])
        callback = request.callback
        if callback is None:
            return self._default
        try:
            return callback in self._callbacks
        except TypeError:  # an unhashable callable: never one of the spider's methods
            return False
