"""Run by test_streaming.py in a child process: a crawl whose item names one big file; prints the peak
RSS (VmHWM, kB) after a small warm-up crawl and after the big one, as JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from eclaw import Settings, Spider
from eclaw.media import FilesPipeline
from eclaw.testing import collect


class OneFile(Spider):
    name = "onefile"
    allowed_domains = ["127.0.0.1"]
    pipelines = [FilesPipeline]

    def __init__(self, page: str, file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls, self.file = [page], file

    def parse(self, response: Any) -> Any:
        yield {"file_urls": [self.file]}


def peak_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


async def main(base: str, store: str) -> None:
    settings = Settings(files_store=store, store="")
    await collect(OneFile, settings=settings, page=f"{base}/page", file=f"{base}/small.bin")
    before = peak_kb()
    items, _ = await collect(OneFile, settings=settings, page=f"{base}/page", file=f"{base}/big.bin")
    print(json.dumps({"before": before, "after": peak_kb(), "files": items[0]["files"]}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
