"""A real forward proxy (tinyproxy) on 127.0.0.1 for the proxy tests."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

TINYPROXY = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start(workdir: Path, auth: tuple[str, str] | None) -> tuple[subprocess.Popen[bytes], int, Path]:
    if not Path(TINYPROXY).exists():
        raise RuntimeError("tinyproxy is not installed (make test installs it: apt-get install tinyproxy)")
    port = free_port()
    conf = workdir / f"tinyproxy-{port}.conf"
    log = workdir / f"tinyproxy-{port}.log"
    lines = [f"Port {port}", "Listen 127.0.0.1", "Timeout 30", "Allow 127.0.0.1", "MaxClients 200", "LogLevel Info"]
    if auth:
        lines.append(f"BasicAuth {auth[0]} {auth[1]}")
    conf.write_text("\n".join(lines) + "\n")
    with log.open("w") as sink:
        process = subprocess.Popen([TINYPROXY, "-d", "-c", str(conf)], stdout=sink, stderr=subprocess.STDOUT)
    return process, port, log


@asynccontextmanager
async def tinyproxy(workdir: Path, auth: tuple[str, str] | None = None) -> AsyncIterator[tuple[str, Path]]:
    """Run tinyproxy in the foreground; yields its address (host:port) and its log file."""
    process, port, log = _start(workdir, auth)
    try:
        await _listening(port, f"tinyproxy (see {log})")
        yield f"127.0.0.1:{port}", log
    finally:
        process.terminate()
        process.wait(5)


def self_signed(workdir: Path) -> ssl.SSLContext:
    """A server TLS context for 127.0.0.1 with a throwaway self-signed certificate (made by openssl)."""
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


MICROSOCKS = shutil.which("microsocks") or "/usr/bin/microsocks"
DANTED = shutil.which("danted") or "/usr/sbin/danted"
DANTE_CONF = """logoutput: {log}
internal: 127.0.0.1 port = {port}
external: 127.0.0.1
socksmethod: none
clientmethod: none
user.privileged: root
user.unprivileged: nobody
client pass {{ from: 127.0.0.0/8 to: 0.0.0.0/0 }}
socks pass {{ from: 127.0.0.0/8 to: 0.0.0.0/0 log: connect }}
"""


async def _listening(port: int, what: str) -> None:
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise RuntimeError(f"{what} did not start on port {port}")


def _start_socks(workdir: Path, kind: str, auth: tuple[str, str] | None) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = free_port()
    log = workdir / f"{kind}-{port}.log"
    if kind == "microsocks":
        if not Path(MICROSOCKS).exists():
            raise RuntimeError("microsocks is not installed (make test installs it: apt-get install microsocks)")
        command = [MICROSOCKS, "-i", "127.0.0.1", "-p", str(port)]
        if auth:
            command += ["-u", auth[0], "-P", auth[1]]
    else:
        if not Path(DANTED).exists():
            raise RuntimeError("dante is not installed (make test installs it: apt-get install dante-server)")
        conf = workdir / f"danted-{port}.conf"
        conf.write_text(DANTE_CONF.format(log=log, port=port))
        command = [DANTED, "-f", str(conf), "-p", str(workdir / f"danted-{port}.pid"), "-N", "1"]
    with log.open("a") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    return process, port, log


@asynccontextmanager
async def socks_server(
    workdir: Path, *, kind: str = "microsocks", auth: tuple[str, str] | None = None
) -> AsyncIterator[tuple[str, Path]]:
    """A real SOCKS server: ``microsocks`` (SOCKS5, with a user and password if ``auth``) or
    ``dante`` (SOCKS4 and SOCKS5, no auth); yields its address (host:port) and its log file."""
    process, port, log = _start_socks(workdir, kind, auth)
    try:
        await _listening(port, kind)
        yield f"127.0.0.1:{port}", log
    finally:
        process.terminate()
        process.wait(5)
