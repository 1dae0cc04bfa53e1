"""Run as a script: write items to a compressed output until the file size limit (RLIMIT_FSIZE, a
real EFBIG from the kernel, like a full disk) refuses bytes; print what was written and dead-lettered."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import sys
from typing import Any

from eclaw.outputs.build import output_for
from eclaw.security.redact import Redactor
from eclaw.settings import Settings
from eclaw.spider import Spider


class Books(Spider):
    name = "books"


class Crawl:
    spider = Books()
    redactor = Redactor()
    settings = Settings()
    run_id = "fill-disk"

    def __init__(self) -> None:
        self.dead: list[int] = []

    def dead_letter(self, output: object, items: list[Any], error: BaseException) -> None:
        self.dead += [item["n"] for item in items]


async def main(path: str, limit: int, count: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    crawl, refused = Crawl(), []
    output: Any = output_for(path, "books")
    await output.open(crawl)
    for n in range(count):
        try:
            await output.process_item({"n": n, "text": os.urandom(60).hex()}, crawl.spider)
        except OSError:
            refused.append(n)  # the crawl dead-letters it
        if n % 500 == 499:
            await output.flush()
    await output.close()
    print(json.dumps({"dead": sorted(crawl.dead + refused)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
