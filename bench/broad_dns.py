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
import time

from bench.broad_site import address, name
from bench.names import name_server
from eclaw.exceptions import DnsError
from eclaw.fetchers.dns import CachingResolver


async def _resolve_all(port: int, hosts: int, in_flight: int) -> tuple[int, int, float]:
    resolver = CachingResolver(servers=[f"127.0.0.1:{port}"], max_in_flight=in_flight, retries=0)
    names = [name(i) for i in range(hosts)]

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
    names = {name(i): address(i) for i in range(args.hosts) if i % 100 != 99}  # 1 % NXDOMAIN
    with name_server(names) as port:
        found, queries, cpu = asyncio.run(_resolve_all(port, args.hosts, args.in_flight))
    print(f"{args.hosts} names, {found} resolved, {queries} queries, {cpu * 1000 / args.hosts:.3f} CPU ms per lookup")


if __name__ == "__main__":
    main()
