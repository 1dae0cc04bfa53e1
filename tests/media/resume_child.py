"""Run by test_resume.py in a child process: one item naming the files given; prints the items as JSON."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from eclaw import Settings, Spider
from eclaw.media import FilesPipeline
from eclaw.testing import collect


class Files(Spider):
    name = "files"
    allowed_domains = ["127.0.0.1"]
    pipelines = [FilesPipeline]

    def __init__(self, page: str, files: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls, self.files = [page], files

    def parse(self, response: Any) -> Any:
        yield {"file_urls": self.files}


async def main(store: str, page: str, files: list[str]) -> None:
    state = os.environ.get("RESUME_STATE_DIR", "")  # with --state: checkpoints, and the next run resumes
    settings = Settings(files_store=store, store="", state_dir=state, checkpoint_interval=0.05)
    items, _ = await collect(Files, settings=settings, page=page, files=files)
    print(json.dumps(items))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
