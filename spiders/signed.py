"""Writing a middleware: sign every request, and keep a part of the site out of the crawl.

    eclaw demo --serve --port 8080 &
    eclaw crawl spiders/signed.py -a base_url=http://127.0.0.1:8080 -a key=s3cret -o products.jsonl

A middleware is any ``async (request, call_next) -> Response`` callable. Code
before ``call_next`` sees (and may replace) the request; code after it sees the
response; raising ``IgnoreRequest`` drops the request with a reason that shows
in the stats. The spider lists its own middlewares; they run inside the
built-in ones (retry, user agent, ...).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any
from urllib.parse import urlsplit

from eclaw import IgnoreRequest, Request, Response
from eclaw.contracts import Fetch
from eclaw.demo.shop import ShopSpider


class SignRequests:
    """Add ``X-Signature: hex(HMAC-SHA256(key, path?query))`` to every request."""

    def __init__(self, key: str) -> None:
        self._key = key.encode()

    def __repr__(self) -> str:
        return "SignRequests()"  # never the key

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        parts = urlsplit(request.url)
        target = parts.path + ("?" + parts.query if parts.query else "")
        signature = hmac.new(self._key, target.encode(), hashlib.sha256).hexdigest()
        return await call_next(request.replace(headers={**request.headers, "X-Signature": signature}))


class BlockPattern:
    """Drop requests whose URL matches ``pattern`` (``RequestDropped(reason="blocked")``)."""

    def __init__(self, pattern: str) -> None:
        self._pattern = re.compile(pattern)

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        if self._pattern.search(request.url):
            raise IgnoreRequest("blocked")
        return await call_next(request)


class SignedShopSpider(ShopSpider):
    name = "signed-shop"
    key = "change-me"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.middlewares = [BlockPattern(r"/category/(books|music)\b"), SignRequests(self.key)]
