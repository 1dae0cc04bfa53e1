"""Requests as plain JSON records, so they can wait on disk (spilled frontier, saved state).

Safe by construction: no pickle. A callback or errback is stored by name and
must be a method of the spider; ``meta`` and ``cb_kwargs`` must be JSON values.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from eclaw.exceptions import ConfigError, NotSerialisable
from eclaw.http import Request

if TYPE_CHECKING:
    from eclaw.spider import Spider

__all__ = ["dumps", "loads"]


def dumps(request: Request, spider: Spider) -> str:
    """``request`` as a JSON text; raises :class:`NotSerialisable` naming what cannot be stored."""
    record: dict[str, Any] = {"url": request.url}
    if request.method != "GET":
        record["method"] = request.method
    if request.body:
        record["body"] = base64.b64encode(request.body).decode("ascii")
    for name in ("callback", "errback"):
        func = getattr(request, name)
        if func is not None:
            record[name] = _method_name(func, spider, name)
    for name in ("_headers", "_meta", "_cb_kwargs"):
        value = getattr(request, name)
        if value:
            record[name[1:]] = value
    if request.priority:
        record["priority"] = request.priority
    if request.depth:
        record["depth"] = request.depth
    if request.dont_filter:
        record["dont_filter"] = True
    if request.referer:
        record["referer"] = request.referer
    if request._id:
        record["id"] = request._id
    try:
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise NotSerialisable(f"request for {request.url} cannot be stored: {exc}") from None


def loads(text: str, spider: Spider) -> Request:
    """The request of a record made by :func:`dumps`, its callbacks looked up on ``spider``."""
    record = json.loads(text)
    url = record["url"]
    callbacks = {}
    for name in ("callback", "errback"):
        if name in record:
            method = getattr(spider, record[name], None)
            if not callable(method):
                raise ConfigError(
                    f"a saved request for {url} needs {name} {record[name]!r}, "
                    f"which spider {spider.name!r} does not have"
                )
            callbacks[name] = method
    body = base64.b64decode(record["body"]) if "body" in record else b""
    request = Request(
        url,
        callbacks.get("callback"),
        method=record.get("method", "GET"),
        headers=record.get("headers"),
        body=body,
        meta=record.get("meta"),
        priority=record.get("priority", 0),
        cb_kwargs=record.get("cb_kwargs"),
        dont_filter=record.get("dont_filter", False),
        errback=callbacks.get("errback"),
        depth=record.get("depth", 0),
        _safe=True,
    )
    request._id = record.get("id", 0)
    request.referer = record.get("referer")
    return request


def _method_name(func: Any, spider: Spider, kind: str) -> str:
    name = getattr(func, "__name__", None)
    if name is None or getattr(func, "__self__", None) is not spider:
        raise NotSerialisable(f"{kind} {func!r} is not a method of the spider: it cannot be stored by name")
    return str(name)
