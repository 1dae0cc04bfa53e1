"""A real name server for the benches: dnsmasq on loopback answering a hosts file, behind the late-answering
relay (``bench.dns_relay``) so each answer takes 20-200 ms as on the internet.

    with name_server({"h0.broad.test": "127.1.1.1"}, delay=(0.02, 0.2)) as port:
        ...  # resolve through 127.0.0.1:port
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from bench.site import taskset

ROOT = Path(__file__).resolve().parent.parent


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(port: int, name: str) -> bool:
    """Whether the server on ``port`` answers a query for ``name`` (any answer: it is up)."""
    query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    query += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00\x00\x01\x00\x01"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.5)
        sock.sendto(query, ("127.0.0.1", port))
        with contextlib.suppress(OSError):
            return sock.recv(512)[:2] == b"\x12\x34"
    return False


@contextlib.contextmanager
def name_server(names: Mapping[str, str], delay: tuple[float, float] = (0.0, 0.0)) -> Iterator[int]:
    """dnsmasq answering ``names`` (NXDOMAIN for other names under ``.test``), behind a relay adding
    ``delay`` (uniform, seconds) when it is not zero; yields the port to ask (on CPU 0, with the site).
    A port found free may be taken before dnsmasq binds it (its TCP side too: after a broad run,
    thousands of loopback ports are busy): then it starts again on others, up to three times."""
    with tempfile.TemporaryDirectory() as tmp:
        hosts = Path(tmp) / "hosts"
        hosts.write_text("".join(f"{addr} {name}\n" for name, addr in names.items()))
        for _attempt in range(3):
            servers, asked = _start(hosts, delay)
            try:
                if _up(servers, asked):
                    yield asked
                    return
            finally:
                for server in servers:
                    server.terminate()
                    server.wait(10)
        raise SystemExit("the bench's name server did not start (is dnsmasq installed?)")


def _start(hosts: Path, delay: tuple[float, float]) -> tuple[list[subprocess.Popen[bytes]], int]:
    port = free_udp_port()
    command = [
        "dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts", f"--addn-hosts={hosts}",
        "--local=/test/", "--listen-address=127.0.0.1", "--bind-interfaces", f"--port={port}",
        "--user=root", "--pid-file=", "--dns-forward-max=1000", "--cache-size=10000", "--local-ttl=300",
    ]  # fmt: skip
    servers = [subprocess.Popen([*taskset(0), *command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    asked = port
    if delay != (0.0, 0.0):
        asked = free_udp_port()
        relay = [sys.executable, "-m", "bench.dns_relay", "--upstream", str(port), "--port", str(asked)]
        relay += ["--min", str(delay[0]), "--max", str(delay[1])]
        servers.append(subprocess.Popen([*taskset(0), *relay], cwd=ROOT, stdout=subprocess.DEVNULL))
    return servers, asked


def _up(servers: list[subprocess.Popen[bytes]], port: int) -> bool:
    """Whether the servers answer on ``port`` (False: one of them exited, its port taken)."""
    deadline = time.monotonic() + 15
    while not _answers(port, "up.test"):
        if any(s.poll() is not None for s in servers):
            return False
        if time.monotonic() > deadline:
            raise SystemExit("the bench's name server did not answer in 15 s")
    return True
