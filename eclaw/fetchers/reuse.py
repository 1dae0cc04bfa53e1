"""A request on a kept-alive connection that the server closed meanwhile: sent once more, on another.

A server, or a proxy (tinyproxy closes every connection after one answer, saying nothing: no
``Connection: close``), may close an idle keep-alive connection without warning. A request sent on
it just then meets a closed socket, not the server, and fails before any byte of an answer: most
often the next hop of a redirect, sent at once on the connection its 3xx came on. Careful clients
(browsers, curl, Go's net/http; RFC 9112 §9.3.1) send such a request again, once.

aiohttp's own re-send stays off (:mod:`eclaw.fetchers.plain`): it re-sent on any connection,
a fresh one too, where the server may well have read the request, and PUT or DELETE as well. Here
:class:`StaleConnection` is raised only for a request that

- went on a connection an earlier response came on (reused from the pool: a fresh connection's
  failure is the ``Retry`` middleware's to count),
- failed before any byte of its answer (aiohttp's parser saw nothing of it), and
- is safe to repeat (GET, HEAD, OPTIONS, TRACE: RFC 9110 §9.2.1; never a POST),

and the fetcher sends it once more; a second failure is the request's.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import aiohttp

if TYPE_CHECKING:
    from aiohttp.client_proto import ResponseHandler
    from aiohttp.connector import Connection

__all__ = ["SAFE_METHODS", "StaleConnection", "reuse_aware_responses"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class StaleConnection(aiohttp.ServerDisconnectedError):
    """A safe request on a reused connection that closed before any byte of its answer came."""


def reuse_aware_responses() -> type[aiohttp.ClientResponse]:
    """aiohttp's response class (its documented ``response_class`` extension point), raising
    :class:`StaleConnection` for a request that meets a reused connection closed under it."""
    used: weakref.WeakSet[ResponseHandler] = weakref.WeakSet()  # connections a response came on

    class ReuseAwareResponse(aiohttp.ClientResponse):
        async def start(self, connection: Connection) -> aiohttp.ClientResponse:
            protocol = connection.protocol
            reused = protocol is not None and protocol in used
            if protocol is not None and not reused:
                used.add(protocol)
            try:
                return await super().start(connection)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                if reused and self.method in SAFE_METHODS and _nothing_received(exc):
                    raise StaleConnection("the server closed the kept-alive connection") from exc
                raise

    return ReuseAwareResponse


def _nothing_received(exc: aiohttp.ServerDisconnectedError | aiohttp.ClientOSError) -> bool:
    """Whether no byte of the answer came: a bare close (a partial head is parsed into the error's
    message), or a reset (what a server that closes with the request unread in its buffer sends)."""
    return not isinstance(exc, aiohttp.ServerDisconnectedError) or isinstance(exc.message, str)
