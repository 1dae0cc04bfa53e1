"""Requests as text, so they can wait on disk (spilled frontier, saved state) or in Redis.

Safe by construction: no pickle. A callback or errback is stored by name and
must be one the spider declares (:func:`declared_callback`); a record naming any other is
refused, so a tampered state file or Redis entry cannot call an arbitrary attribute.
``meta`` and ``cb_kwargs`` must be JSON values.
:func:`to_text` and :func:`from_text` write a plain link (the commonest request) as
tab-separated fields instead, a sixth of the work of a JSON record: the frontier's disk, the
saved state, the cluster's queue and the links between processes store requests so.
"""

from __future__ import annotations

import base64
import inspect
import json
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from eclaw.exceptions import ConfigError, NotSerialisable
from eclaw.http import Request
from eclaw.http.request import plain_request

if TYPE_CHECKING:
    from eclaw.spider import Spider

__all__ = ["declared_callback", "dumps", "from_line", "from_text", "loads", "to_line", "to_text"]


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
            callbacks[name] = _spider_method(spider, record[name], name, url)
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


def to_text(request: Request, spider: Spider) -> str:
    """``request`` as one line of text: a plain link (a GET with nothing of its own but its callback,
    depth, referer and id) as ``URL<tab>callback<tab>depth<tab>referer`` (then ``<tab>id`` if it has
    one), any other request as its JSON record (:func:`dumps`; it never starts with a URL's scheme)."""
    url, referer, callback = request.url, request.referer or "", request.callback
    if (
        request.method == "GET"
        and not (request.body or request._headers or request._meta or request._cb_kwargs)
        and request.errback is None
        and not request.priority
        and not request.dont_filter
        and _one_field(url)
        and _one_field(referer)
    ):
        name = "" if callback is None else _method_name(callback, spider, "callback")
        ident = f"\t{request._id}" if request._id else ""
        return f"{url}\t{name}\t{request.depth}\t{referer}{ident}"
    return dumps(request, spider)


def from_text(text: str, spider: Spider) -> Request:
    """The request of a line made by :func:`to_text`."""
    if text.startswith("{"):
        return loads(text, spider)
    url, name, depth, referer, *ident = text.split("\t")
    request = plain_request(url, _spider_method(spider, name, "callback", url) if name else None)
    request.depth = int(depth)
    request.referer = referer or None
    if ident:
        request._id = int(ident[0])
    return request


def to_line(request: Request, spider: Spider) -> bytes:
    """``request`` as one line of bytes, newline included (:func:`to_text`)."""
    return f"{to_text(request, spider)}\n".encode()


def from_line(line: bytes, spider: Spider) -> Request:
    """The request of a line made by :func:`to_line` (without its newline)."""
    return from_text(line.decode(), spider)


def _one_field(text: str) -> bool:
    """Whether ``text`` holds no tab or line break (a request's URL never does: it is made safe)."""
    return "\t" not in text and "\n" not in text and "\r" not in text


def _spider_method(spider: Spider, name: str, kind: str, url: str) -> Any:
    """The declared callback ``name``, the ``kind`` (callback, errback) of a saved request for ``url``."""
    method = declared_callback(spider, name)
    if method is None:
        has = inspect.isfunction(_first(type(spider), name))  # looked up on the class only
        what = "does not declare as a callback: refused" if has else "does not have"
        raise ConfigError(f"a saved request for {url} needs {kind} {name!r}, which spider {spider.name!r} {what}")
    return method


def _method_name(func: Any, spider: Spider, kind: str) -> str:
    name = getattr(func, "__name__", None)
    if name is None or getattr(func, "__self__", None) is not spider:
        raise NotSerialisable(f"{kind} {func!r} is not a method of the spider: it cannot be stored by name")
    if declared_callback(spider, name) != func:
        raise NotSerialisable(
            f"{kind} {name!r} is not a callback spider {spider.name!r} declares (a public method, or one"
            " its rules, sitemap_rules or expect_items name): it cannot be stored by name"
        )
    return str(name)


# The callbacks eclaw.Spider itself gives requests (its default, its rules' and its sitemaps').
_OWN_CALLBACKS = frozenset({"parse", "_parse_rule", "_parse_sitemap", "_parse_source"})
_declared: WeakKeyDictionary[Any, dict[str, Any]] = WeakKeyDictionary()  # spider -> name -> its function


def declared_callback(spider: Spider, name: str) -> Any:
    """The bound method ``name`` if it is a callback ``spider`` declares, else ``None``.

    Declared: a public method (a plain function, not a property, attribute or static method)
    defined on the spider's own classes (its subclass of :class:`eclaw.Spider`, their bases and
    mixins), that is not part of eclaw.Spider's own API (``start_requests``, ``is_banned``...); any
    method of those classes that its ``rules``, ``sitemap_rules`` or ``expect_items`` name;
    and eclaw's own callbacks (``parse``, and those of rules and sitemaps). Nothing is looked
    up on the instance, so no other attribute is ever evaluated or called.
    """
    known = _declared.get(spider)
    if known is None:
        known = _declared[spider] = {}
    func = known.get(name)
    if func is None and isinstance(name, str):
        func = _function(type(spider), name)
        if func is None or (name.startswith("_") and name not in _OWN_CALLBACKS and name not in _named(spider)):
            return None
        known[name] = func  # the function, not the bound method: that would keep the spider alive
    return None if func is None else func.__get__(spider, type(spider))


def _function(cls: type, name: str) -> Any:
    """The plain function ``name`` of the spider's classes, none of eclaw.Spider's API but its own callbacks."""
    from eclaw.spider import Spider

    if name not in _OWN_CALLBACKS and any(name in klass.__dict__ for klass in Spider.__mro__):
        return None  # eclaw.Spider's API (start_requests, is_banned, ...), overridden or not, is no callback
    value = _first(cls, name)
    return value if inspect.isfunction(value) else None


def _first(cls: type, name: str) -> Any:
    """What the first class of ``cls``'s MRO that defines ``name`` holds (``None``: none does)."""
    return next((klass.__dict__[name] for klass in cls.__mro__ if name in klass.__dict__), None)


def _named(spider: Spider) -> set[str]:
    """The method names the spider's rules, sitemap rules and item expectations give."""
    names: set[str] = set()
    for rule in spider.rules:
        callbacks = (getattr(rule, "callback", None), getattr(rule, "errback", None))
        names.update(value for value in callbacks if isinstance(value, str))
    for pair in spider.sitemap_rules:
        if isinstance(pair, tuple | list) and len(pair) == 2 and isinstance(pair[1], str):
            names.add(pair[1])
    expected = spider.expect_items
    names.update([expected] if isinstance(expected, str) else [str(n) for n in expected])
    return names
