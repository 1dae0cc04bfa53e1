"""A request: what to fetch, and what to do with the response."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from eclaw.http.curl import request_from_curl, to_curl
from eclaw.http.forms import FormData, FormOptions, form_request, json_request
from eclaw.http.types import Callback, Page, RequestOptions
from eclaw.http.urls import absolute_url

__all__ = ["Callback", "Request", "plain_request"]

_new = object.__new__


class Request:
    """A request to fetch ``url`` and hand the response to ``callback``.

    Args:
        url: absolute URL; http(s) URLs are percent-escaped and IDNA-encoded.
            Other schemes are accepted here and dropped by the frontier.
        callback: spider method (or function) receiving the ``Response``;
            ``None`` means the spider's ``parse``.
        method: HTTP method.
        headers: extra request headers.
        body: request body.
        meta: free-form per-request data, readable as ``response.meta``.
        priority: higher runs first.
        cb_kwargs: extra keyword arguments for the callback.
        dont_filter: skip duplicate and offsite filtering.
        errback: called with the ``RequestFailed`` event when the request
            finally fails; may yield items and requests like a callback.
        depth: link distance from a start request (set by the engine).
        render: fetch it with a browser (``meta["render"] = True``): its page is what the
            browser shows once its scripts ran (the ``browser`` fetcher, ``eclaw[browser]``).
        cookies: cookies to send with it (``meta["cookies"]``), kept in its cookie jar.

    ``referer`` is the URL of the page whose callback yielded the request (set by the crawl,
    sent as ``Referer`` unless the ``referer`` setting is off).
    """

    # headers, meta and cb_kwargs are made on first use: most requests wait in
    # the frontier with all three empty, and three empty dicts would double
    # their size there.
    __slots__ = (
        "_cb_kwargs",
        "_headers",
        "_id",
        "_meta",
        "body",
        "callback",
        "depth",
        "dont_filter",
        "errback",
        "method",
        "priority",
        "referer",
        "url",
    )
    _FIELDS = (
        "url",
        "callback",
        "method",
        "headers",
        "body",
        "meta",
        "priority",
        "cb_kwargs",
        "dont_filter",
        "errback",
        "depth",
    )

    _PLAIN_FIELDS = frozenset({"headers", "meta", "priority", "cb_kwargs", "dont_filter", "depth", "referer"})

    def __init__(
        self,
        url: str,
        callback: Callback | None = None,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        body: bytes | str = b"",
        meta: dict[str, Any] | None = None,
        priority: int = 0,
        cb_kwargs: dict[str, Any] | None = None,
        dont_filter: bool = False,
        errback: Callback | None = None,
        depth: int = 0,
        render: bool = False,
        cookies: Mapping[str, str] | None = None,
        _safe: bool = False,
    ) -> None:
        # Written out by hand: this runs once per extracted link.
        self.url = url if _safe else absolute_url(url)
        self.callback = callback
        self.method = method if method == "GET" else method.upper()
        self._headers = headers
        self.body = body.encode() if isinstance(body, str) else body
        # its own meta: the fetchers write into it (redirect_urls, http_version...), so the links that
        # one follow_all(meta=...) makes must not share one dict
        self._meta = _with_options(meta, render, cookies) if render or cookies else (dict(meta) if meta else None)
        self.priority = priority
        self._cb_kwargs = cb_kwargs
        self.dont_filter = dont_filter
        self.errback = errback
        self.depth = depth
        self.referer: str | None = None
        self._id = 0  # its row in a saved crawl's state (0: none); kept by replace()
        if callback is not None and not callable(callback):
            raise TypeError(f"Request callback must be callable, got {callback!r}")
        if errback is not None and not callable(errback):
            raise TypeError(f"Request errback must be callable, got {errback!r}")

    @property
    def headers(self) -> dict[str, str]:
        if self._headers is None:
            self._headers = {}
        return self._headers

    @headers.setter
    def headers(self, value: dict[str, str]) -> None:
        self._headers = value

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = {}
        return self._meta

    @meta.setter
    def meta(self, value: dict[str, Any]) -> None:
        self._meta = value

    @property
    def cb_kwargs(self) -> dict[str, Any]:
        if self._cb_kwargs is None:
            self._cb_kwargs = {}
        return self._cb_kwargs

    @cb_kwargs.setter
    def cb_kwargs(self, value: dict[str, Any]) -> None:
        self._cb_kwargs = value

    def replace(self, **changes: Any) -> Request:
        """Return a copy with ``changes`` applied (meta and headers are copied)."""
        unknown = changes.keys() - self._PLAIN_FIELDS
        if unknown:  # a field the constructor checks or converts
            return self._rebuilt(changes)
        new = _new(Request)
        new.url, new.callback, new.method, new.body = self.url, self.callback, self.method, self.body
        new.priority, new.dont_filter, new.errback = self.priority, self.dont_filter, self.errback
        new.depth, new._id, new.referer = self.depth, self._id, self.referer
        new._meta = dict(self._meta) if self._meta else None
        new._headers = dict(self._headers) if self._headers else None
        new._cb_kwargs = dict(self._cb_kwargs) if self._cb_kwargs else None
        for name, value in changes.items():
            setattr(new, name, value)
        return new

    def _rebuilt(self, changes: dict[str, Any]) -> Request:
        unknown = changes.keys() - set(self._FIELDS)
        if unknown:
            raise TypeError(f"Request has no field {sorted(unknown)[0]!r}")
        fields = {name: getattr(self, name) for name in self._FIELDS}
        fields["meta"] = dict(self.meta)
        fields["headers"] = dict(self.headers)
        fields["cb_kwargs"] = dict(self.cb_kwargs)
        fields.update(changes)
        new = Request(**fields, _safe="url" not in changes)
        new._id, new.referer = self._id, self.referer
        return new

    @classmethod
    def from_form(cls, response: Page, formdata: FormData | None = None, **options: Unpack[FormOptions]) -> Request:
        """A request submitting a form of ``response`` as a browser would: hidden fields (CSRF
        tokens) kept, the form's action, method and enctype honoured; Scrapy's
        ``FormRequest.from_response``. See :func:`eclaw.http.forms.form_request` for the options
        (``formcss``, ``formnumber``, ``clickdata``...); the others are ``Request``'s own."""
        return form_request(cls, response, formdata, **options)

    @classmethod
    def json(
        cls, url: str, data: Any = None, *, method: str | None = None, **options: Unpack[RequestOptions]
    ) -> Request:
        """A request sending ``data`` as JSON: a POST (or ``method``) with ``Content-Type:
        application/json``; without ``data``, a GET that accepts JSON."""
        return json_request(cls, url, data, method=method, **options)

    @classmethod
    def from_curl(cls, command: str, ignore_unknown_options: bool = False, **options: Any) -> Request:
        """The request a curl command line sends (a browser's "Copy as cURL"): its URL, ``-X``,
        ``-H``, ``-d``/``--data-raw``, ``-b``, ``-u``...; ``options`` are ``Request``'s own
        (``callback=``...) and win. An option it cannot honour is a ``ValueError`` naming it (or,
        ``ignore_unknown_options=True``, a warning); see :mod:`eclaw.http.curl`."""
        return request_from_curl(cls, command, ignore_unknown_options, **options)

    def to_curl(self) -> str:
        """A curl command that sends what this request carries: its method, URL, headers, cookies
        and body, credentials included (you asked for them: share it with care)."""
        return to_curl(self)

    def __repr__(self) -> str:
        return f"<Request {self.method} {self.url}>"


def plain_request(url: str, callback: Callback | None) -> Request:
    """A GET ``Request`` for ``url``, already safe, built without the constructor's checks: the common
    link, once per extracted href (a test compares it with a constructed one, slot by slot)."""
    request = _new(Request)
    request.url = url
    request.callback = callback
    request.method = "GET"
    request.body = b""
    request._headers = request._meta = request._cb_kwargs = request.errback = None
    request.priority = request.depth = request._id = 0
    request.dont_filter = False
    request.referer = None
    return request


def _with_options(meta: dict[str, Any] | None, render: bool, cookies: Mapping[str, str] | None) -> dict[str, Any]:
    """``meta`` with the keys ``render=`` and ``cookies=`` stand for."""
    meta = dict(meta or {})
    if render:
        meta["render"] = True
    if cookies:
        meta["cookies"] = dict(cookies)
    return meta
