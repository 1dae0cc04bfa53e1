"""The benchmark crawl cut into parts with no coordination at all: the spider follows only the links
of its own part (by a hash of the URL, fragment aside). N of these side by side are the most N
processes of any design can do on this machine (``python -m bench.processes --bound``)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

from bench.contenders.eclaw_spider import BenchSpider
from eclaw import Request, Response


class PartSpider(BenchSpider):
    part = "0"
    parts = "1"

    def parse(self, response: Response) -> Iterator[dict[str, Any] | Request]:
        part, parts = int(self.part), int(self.parts)
        for thing in super().parse(response):
            if isinstance(thing, dict) or zlib.crc32(thing.url.partition("#")[0].encode()) % parts == part:
                yield thing
