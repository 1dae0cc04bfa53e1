"""Real servers for the credential-scope tests: an origin that speaks TLS and plain HTTP on one port,
and a recording forward proxy (CONNECT and absolute-form requests) that says what it was sent.

- :func:`dual_origin`: one port on 127.0.0.1 and on 127.0.0.2 (two hosts) that answers TLS when a
  connection opens with a ClientHello (first byte 0x16) and plain HTTP otherwise, so
  ``https://127.0.0.1:P/`` redirecting to ``http://127.0.0.1:P/`` is a real downgrade on the same
  host and port. It records every request with the headers it arrived with.
- :func:`recording_proxy`: a forward proxy speaking the real protocol over asyncio streams; it
  records each CONNECT and each proxied request with its headers, and forwards plain HTTP without
  its ``Proxy-Authorization`` (a hop-by-hop header, as real proxies do).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aiohttp import web
from multidict import CIMultiDict

__all__ = ["Heard", "Origin", "Recorder", "dual_origin", "recording_proxy"]

HOSTS = ("127.0.0.1", "127.0.0.2")


@dataclass
class Heard:
    """One request as a server received it."""

    scheme: str  # "https" or "http" for an origin; "connect" or "http" for a proxy
    host: str
    path: str
    headers: CIMultiDict[str]

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}{self.path}"


@dataclass
class Recorder:
    heard: list[Heard] = field(default_factory=list)

    def with_header(self, name: str) -> list[tuple[str, str]]:
        """The scheme and path (no query) of each request that came with header ``name``."""
        return [(seen.scheme, seen.path.partition("?")[0]) for seen in self.heard if name in seen.headers]

    def paths(self) -> list[str]:
        return [seen.url for seen in self.heard]


@dataclass
class Origin(Recorder):
    port: int = 0

    def url(self, scheme: str, path: str, host: str = HOSTS[0]) -> str:
        return f"{scheme}://{host}:{self.port}{path}"


def _app(origin: Origin) -> web.Application:
    """``/to?url=...[&status=302]`` redirects, ``/refresh?url=...`` refreshes, ``/busy`` answers 503
    once then 200 (per scheme), anything else is a page; every request is recorded."""
    busy: set[str] = set()

    async def handle(request: web.Request) -> web.StreamResponse:
        scheme = "https" if request.secure else "http"
        origin.heard.append(Heard(scheme, request.host, request.path_qs, CIMultiDict(request.headers)))
        if request.path == "/to":
            return web.Response(
                status=int(request.query.get("status", 302)), headers={"Location": request.query["url"]}
            )
        if request.path == "/refresh":
            meta = f'<meta http-equiv="refresh" content="0; url={request.query["url"]}">'
            return web.Response(text=f"<html><head>{meta}</head></html>", content_type="text/html")
        if request.path == "/busy" and scheme not in busy:
            busy.add(scheme)
            return web.Response(status=503, text="busy")
        return web.Response(text=f"<title>{scheme} {request.path}</title>", content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


@asynccontextmanager
async def dual_origin(tls: ssl.SSLContext) -> AsyncIterator[Origin]:
    """An origin answering TLS and plain HTTP on one port of 127.0.0.1 and 127.0.0.2 (see the module)."""
    origin = Origin()
    runner = web.AppRunner(_app(origin))
    await runner.setup()
    assert runner.server is not None
    protocols = runner.server
    loop = asyncio.get_running_loop()
    listeners: list[socket.socket] = []
    for host in HOSTS:
        listener = socket.create_server((host, origin.port))
        listener.setblocking(False)
        origin.port = listener.getsockname()[1]
        listeners.append(listener)

    async def sniff(conn: socket.socket) -> None:
        readable = loop.create_future()
        fd = conn.fileno()

        def ready() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(fd, ready)
        try:
            await readable  # the first byte is there (or the peer went): peek at it, leave it to be read
        except asyncio.CancelledError:
            conn.close()  # a connection that never spoke, at the end of the test
            raise
        finally:
            loop.remove_reader(fd)
        try:
            first = conn.recv(1, socket.MSG_PEEK)
        except OSError:
            first = b""
        if not first:
            conn.close()
            return
        with contextlib.suppress(OSError, ssl.SSLError):
            await loop.connect_accepted_socket(protocols, conn, ssl=tls if first == b"\x16" else None)

    async def accept(listener: socket.socket) -> None:
        while True:
            conn, _ = await loop.sock_accept(listener)
            conn.setblocking(False)
            tasks.add(task := asyncio.ensure_future(sniff(conn)))
            task.add_done_callback(tasks.discard)

    tasks: set[asyncio.Future[None]] = set()
    acceptors = [asyncio.ensure_future(accept(listener)) for listener in listeners]
    try:
        yield origin
    finally:
        for task in [*acceptors, *tasks]:  # a connection that never spoke is still being sniffed
            task.cancel()
        for listener in listeners:
            listener.close()
        await runner.cleanup()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError, ConnectionError):
        writer.close()


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, str, CIMultiDict[str]] | None:
    line = (await reader.readline()).decode("latin-1").strip()
    if not line:
        return None
    method, target, _ = line.split(" ", 2)
    headers: CIMultiDict[str] = CIMultiDict()
    while (header := (await reader.readline()).decode("latin-1").strip()) != "":
        name, _, value = header.partition(":")
        headers.add(name.strip(), value.strip())
    return method, target, headers


@asynccontextmanager
async def recording_proxy() -> AsyncIterator[tuple[str, Recorder]]:
    """A forward proxy on 127.0.0.1 (see the module); yields its address (host:port) and its records.
    One request per connection for plain HTTP (answered with ``Connection: close``)."""
    recorder = Recorder()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await _read_head(reader)
        if head is None:
            writer.close()
            return
        method, target, headers = head
        if method == "CONNECT":
            recorder.heard.append(Heard("connect", target, "", headers))
            host, _, port = target.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            return
        parts = urlsplit(target)
        recorder.heard.append(
            Heard("http", parts.netloc, parts.path + (f"?{parts.query}" if parts.query else ""), headers)
        )
        up_reader, up_writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        forwarded = [f"{method} {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1"]
        skip = {"proxy-authorization", "proxy-connection", "connection", "keep-alive"}
        forwarded += [f"{name}: {value}" for name, value in headers.items() if name.lower() not in skip]
        up_writer.write(("\r\n".join([*forwarded, "Connection: close", "", ""])).encode("latin-1"))
        length = int(headers.get("Content-Length", "0") or 0)
        if length:
            up_writer.write(await reader.readexactly(length))
        await up_writer.drain()
        await _pipe(up_reader, writer)
        up_writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}", recorder
    finally:
        server.close()
