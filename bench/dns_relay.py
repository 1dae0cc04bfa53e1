"""A DNS relay that answers late: each query goes to a real server (dnsmasq) after a wait chosen by its name.

Real name servers take 20-200 ms to answer; dnsmasq on loopback answers at once. The relay sits
between a crawler and dnsmasq, forwards each query's bytes unchanged and sends the server's answer
back after the wait ``hold(name)`` returns, so the crawler meets realistic latency.

    python -m bench.dns_relay --upstream 5353 --port 5354 --min 0.02 --max 0.2
"""

from __future__ import annotations

import argparse
import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import cast

Hold = Callable[[str], Awaitable[None]]


def query_name(packet: bytes) -> str:
    """The name asked for in a DNS query (its first question), lower-case, without the final dot."""
    labels, at = [], 12  # the question follows the 12-byte header
    while at < len(packet) and packet[at]:
        size = packet[at]
        labels.append(packet[at + 1 : at + 1 + size].decode("ascii", "replace"))
        at += 1 + size
    return ".".join(labels).lower()


class DelayRelay(asyncio.DatagramProtocol):
    """Relays each datagram to ``upstream`` once ``hold(name)`` is done, and the answer back."""

    def __init__(self, upstream: tuple[str, int], hold: Hold) -> None:
        self.upstream, self.hold = upstream, hold
        self.transport: asyncio.DatagramTransport | None = None
        self.asked: list[str] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.DatagramTransport", transport)

    @property
    def port(self) -> int:
        """The port it listens on."""
        assert self.transport is not None, "not listening"
        return int(self.transport.get_extra_info("sockname")[1])

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        name = query_name(data)
        self.asked.append(name)
        task = asyncio.get_running_loop().create_task(self._relay(data, addr, name))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _relay(self, data: bytes, addr: tuple[str, int], name: str) -> None:
        await self.hold(name)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[bytes] = loop.create_future()

        class Upstream(asyncio.DatagramProtocol):
            def datagram_received(self, reply: bytes, _: tuple[str, int]) -> None:
                if not answer.done():
                    answer.set_result(reply)

        transport, _ = await loop.create_datagram_endpoint(Upstream, remote_addr=self.upstream)
        try:
            transport.sendto(data)
            reply = await asyncio.wait_for(answer, 10)
        except TimeoutError:
            return  # no answer: the client times out, as with a lost packet
        finally:
            transport.close()
        if self.transport is not None:
            self.transport.sendto(reply, addr)

    async def close(self) -> None:
        """Stop listening; queries held now are never answered."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.transport is not None:
            self.transport.close()


async def start(port: int, upstream: tuple[str, int], hold: Hold) -> DelayRelay:
    """A relay listening on 127.0.0.1:``port`` (0: any free port; its port is ``transport``'s)."""
    loop = asyncio.get_running_loop()
    transport, relay = await loop.create_datagram_endpoint(
        lambda: DelayRelay(upstream, hold), local_addr=("127.0.0.1", port)
    )
    relay.connection_made(transport)  # at once: the loop calls it only on its next turn
    return relay


async def _serve(args: argparse.Namespace) -> None:
    spread = random.Random(args.seed)

    async def hold(_: str) -> None:
        await asyncio.sleep(spread.uniform(args.min, args.max))

    await start(args.port, ("127.0.0.1", args.upstream), hold)
    print(f"relaying 127.0.0.1:{args.port} -> {args.upstream}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    """Relay until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=int, required=True, help="the real server's port on 127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--min", type=float, default=0.02, help="shortest wait, seconds")
    parser.add_argument("--max", type=float, default=0.2, help="longest wait, seconds")
    parser.add_argument("--seed", type=int, default=1)
    asyncio.run(_serve(parser.parse_args()))


if __name__ == "__main__":
    main()
