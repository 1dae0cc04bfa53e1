"""A bare HTTP/1.1 server for responses aiohttp's server will not send as they are (no
Content-Type at all, say): each path answers fixed headers and body; hits are counted."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class RawSite:
    """``routes[path] = (status, headers, body)``; anything else is a 404. ``hits[path]`` counts requests."""

    def __init__(self, routes: dict[str, tuple[int, dict[str, str], bytes]]) -> None:
        self.routes = routes
        self.hits: Counter[str] = Counter()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                path = line.split(b" ")[1].decode()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # the request headers: not needed
                self.hits[path] += 1
                status, headers, body = self.routes.get(path, (404, {"Content-Type": "text/plain"}, b"not found"))
                head = [
                    f"HTTP/1.1 {status} X",
                    f"Content-Length: {len(body)}",
                    *(f"{k}: {v}" for k, v in headers.items()),
                ]
                # surrogates stand for raw bytes: a header in Latin-1 (not UTF-8) is sent as it is
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode("utf-8", "surrogateescape") + body)
                await writer.drain()
        except (ConnectionError, IndexError):
            return
        finally:
            writer.close()

    @asynccontextmanager
    async def serve(self) -> AsyncIterator[str]:
        """Serve on 127.0.0.1 on a free port; yields the base URL."""
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.close()
            await server.wait_closed()
