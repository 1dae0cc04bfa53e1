"""Running the CLI on the archive test site, and reading archives back with warcio."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders

ROOT = Path(__file__).parents[2]
SPIDER = str(Path(__file__).with_name("site.py")) + ":ArchiveSpider"


async def crawl(*args: str, cwd: Path, spider: str = SPIDER, seconds: float = 120) -> str:
    """Run ``eclaw crawl`` with ``args``; its output (it must succeed)."""
    process = await start(*args, cwd=cwd, spider=spider)
    stdout, stderr = await asyncio.wait_for(process.communicate(), seconds)
    assert process.returncode == 0, stderr.decode()[-3000:]
    return stdout.decode() + stderr.decode()


async def start(*args: str, cwd: Path, spider: str = SPIDER) -> asyncio.subprocess.Process:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eclaw", "crawl", spider, "-s", "store=", "--log-level", "WARNING", *args,
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


@dataclass
class Record:
    """One record read back: its headers, HTTP headers, raw payload, place in the file."""

    kind: str
    headers: dict[str, str]
    http: StatusAndHeaders | None
    payload: bytes
    offset: int
    length: int
    digests_passed: bool | None

    @property
    def uri(self) -> str:
        return self.headers.get("WARC-Target-URI", "")

    @property
    def path(self) -> str:
        return "/" + self.uri.split("/", 3)[3] if self.uri.count("/") >= 3 else self.uri


def read_archive(path: Path) -> list[Record]:
    """Every record of the archive ``path``, its digests checked by warcio as it reads."""
    records = []
    with path.open("rb") as file:
        iterator = ArchiveIterator(file, check_digests=True)
        for record in iterator:
            payload = record.raw_stream.read()
            records.append(
                Record(
                    kind=record.rec_type,
                    headers=dict(record.rec_headers.headers),
                    http=record.http_headers,
                    payload=payload,
                    offset=iterator.get_record_offset(),
                    length=0,
                    digests_passed=record.digest_checker.passed,
                )
            )
            iterator.read_to_end(record)
            records[-1].length = iterator.get_record_length()
    return records


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()
