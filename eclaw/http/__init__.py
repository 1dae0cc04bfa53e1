"""HTTP values: :class:`Request` and :class:`Response`, URLs, selectors, and telling text from binary."""

from eclaw.http.message import Request, Response

__all__ = ["Request", "Response"]
