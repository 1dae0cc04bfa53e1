"""The CDXJ index of an archive, in pywb's format: a line per response or revisit record,
``SURT-key timestamp {json}`` with the record's URL, media type, status, payload digest, and its
``length`` and ``offset`` in the archive file (a gzip member's, for ``.warc.gz``), sorted.

While the crawl runs the lines go, unsorted, to a spool beside the index (``crawl.cdxj.part``),
cut back with the archive on resume; at the end they are sorted into ``crawl.cdxj`` (runs of
:data:`RUN_LINES` lines sorted in memory, then merged), and the spool is removed.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import surt

from eclaw.archive.records import Written

__all__ = ["RUN_LINES", "cdxj_line", "index_path", "read_index", "sort_index"]

RUN_LINES = 200_000  # lines sorted in memory at once (~60 MB at most)


def index_path(archive: Path) -> Path:
    """``crawl.warc.gz`` → ``crawl.cdxj`` (beside it)."""
    name = archive.name
    for suffix in (".warc.gz", ".warc"):
        if name.endswith(suffix):
            return archive.with_name(name[: -len(suffix)] + ".cdxj")
    return archive.with_name(name + ".cdxj")


def cdxj_line(record: Written, filename: str, offset: int) -> bytes:
    """The index line of ``record``, written at ``offset`` of the archive ``filename``."""
    fields = {"url": record.uri, "mime": record.mime, "status": record.status}
    if record.digest:
        fields["digest"] = record.digest.removeprefix("sha1:")
    fields |= {"length": str(len(record.data)), "offset": str(offset), "filename": filename}
    kept = {k: v for k, v in fields.items() if v and v != "-"}  # as pywb's indexer leaves them out
    return f"{_key(record.uri)} {_timestamp(record.date)} {json.dumps(kept)}\n".encode()


def sort_index(spool: Path, target: Path) -> None:
    """Sort the lines of ``spool`` into ``target`` (atomically: a temporary file renamed)."""
    runs: list[Path] = []
    try:
        with spool.open("rb") as source:
            while chunk := list(itertools.islice(source, RUN_LINES)):
                chunk.sort()
                with tempfile.NamedTemporaryFile("wb", dir=target.parent, delete=False, suffix=".run") as run:
                    run.writelines(chunk)
                runs.append(Path(run.name))
        tmp = target.with_name(target.name + ".eclaw-tmp")
        with tmp.open("wb") as out:
            files = [path.open("rb") for path in runs]
            try:
                out.writelines(heapq.merge(*files))
            finally:
                for file in files:
                    file.close()
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    finally:
        for path in runs:
            path.unlink(missing_ok=True)


def read_index(path: Path) -> Iterator[tuple[str, str, dict[str, str]]]:
    """The lines of a CDXJ index: key, timestamp and fields."""
    with path.open(encoding="utf-8") as file:
        for line in file:
            key, timestamp, fields = line.rstrip("\n").split(" ", 2)
            yield key, timestamp, json.loads(fields)


def _key(url: str) -> str:
    try:
        return str(surt.surt(url))
    except Exception:  # a URL surt cannot take apart: indexed as it is
        return url


def _timestamp(warc_date: str) -> str:
    """``2026-12-04T12:00:00.123456Z`` → ``20261204120000``."""
    return "".join(c for c in warc_date if c.isdigit())[:14]
