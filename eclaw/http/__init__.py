"""HTTP values: :class:`Request` and :class:`Response`, URLs, selectors, and telling text from binary."""

from eclaw.http.request import Request
from eclaw.http.response import Response

__all__ = ["Request", "Response"]
