"""CPU cost of name resolution for a broad crawl: resolve N names through a local dnsmasq.

``python -m bench.broad_dns --hosts 10000`` starts dnsmasq on 127.0.0.1 answering
``h{i}.broad.test`` (1 % of the names NXDOMAIN), resolves every name once with eclaw's
``CachingResolver`` and prints the process's CPU ms per lookup, to set against eclaw's CPU ms
per page in ``bench.broad``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from eclaw.downloaders.dns import CachingResolver
from eclaw.exceptions import DnsError


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _resolve_all(port: int, hosts: int, in_flight: int) -> tuple[int, int, float]:
    resolver = CachingResolver(servers=[f"127.0.0.1:{port}"], max_in_flight=in_flight, retries=0)
    names = [f"h{i}.broad.test" for i in range(hosts)]

    async def one(name: str) -> bool:
        with contextlib.suppress(DnsError):
            await resolver.resolve(name, 80)
            return True
        return False

    started = time.process_time()
    found = sum(await asyncio.gather(*(one(name) for name in names)))
    cpu = time.process_time() - started
    await resolver.close()
    return found, resolver.queries, cpu


def main() -> None:
    """Run the bench and print one line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--in-flight", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        hosts = Path(tmp) / "hosts"
        lines = (f"127.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255 or 1} h{i}.broad.test\n" for i in range(args.hosts))
        hosts.write_text("".join(line for i, line in enumerate(lines) if i % 100 != 99))  # 1 % NXDOMAIN
        port = _free_port()
        server = subprocess.Popen(
            ["dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts", f"--addn-hosts={hosts}",
             "--local=/test/", "--listen-address=127.0.0.1", "--bind-interfaces", f"--port={port}",
             "--user=root", "--pid-file=", "--dns-forward-max=1000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            time.sleep(0.5)  # a bench, not a test: dnsmasq reads its hosts file at start
            found, queries, cpu = asyncio.run(_resolve_all(port, args.hosts, args.in_flight))
        finally:
            server.terminate()
            server.wait(10)
    print(f"{args.hosts} names, {found} resolved, {queries} queries, {cpu * 1000 / args.hosts:.3f} CPU ms per lookup")


if __name__ == "__main__":
    main()
