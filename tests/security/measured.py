"""``eclaw crawl`` as a real process whose peak memory is measured, for the input-bound tests: forked
from the fork server (tests/forkserver.py: no Python to start, no eclaw to import again, ~0.4 s of
CPU each), and its peak RSS reported by the process itself as it exits.

The spider file the test writes gets a hook appended that runs at the interpreter's exit and prints
``VmHWM`` (the process's own high-water mark of resident memory) on stderr. A forked process starts
with the fork server's resident pages as its own (the kernel sets its mark there at the fork): about
what a new Python has once it has imported eclaw, so a crawl measures as one started anew would (the
two peaks measured within 2 MiB of each other: 59 and 61 MiB for the robots.txt crawl, 109 for both
of the 400,000-link one).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from tests.forkserver import PIPE, spawn

__all__ = ["Measured", "crawl_measured", "measurable"]

_REPORT = '''

import atexit as _atexit
import re as _re
import sys as _sys


@_atexit.register
def _peak_rss() -> None:  # the crawling process's own peak RSS, told as it exits (the test reads it)
    with open("/proc/self/status") as status:
        peak = _re.search(r"VmHWM:\\s+(\\d+)", status.read())
    print(f"PEAK_RSS_KIB={peak.group(1) if peak else ''}", file=_sys.stderr)
'''


def measurable(spider: Path, source: str) -> Path:
    """Write the spider ``source`` to ``spider``, with the hook that reports its process's peak RSS."""
    spider.write_text(source + _REPORT)
    return spider


@dataclass(frozen=True, slots=True)
class Measured:
    """A finished crawl: its exit code, what it printed, and its peak RSS in MiB."""

    returncode: int
    stdout: str
    stderr: str
    peak: int


async def crawl_measured(spider: Path, cwd: Path, *args: str, wait: float = 600) -> Measured:
    """``eclaw crawl SPIDER -q ARGS`` in ``cwd`` (a spider written by :func:`measurable`), run to its end."""
    child = await spawn("crawl", str(spider), "-q", *args, cwd=cwd, stdout=PIPE, stderr=PIPE)
    try:
        out, err = await asyncio.wait_for(child.communicate(), wait)
    finally:
        child.close()
    stderr = err.decode()
    peaks = [line for line in stderr.splitlines() if line.startswith("PEAK_RSS_KIB=")]
    assert peaks and peaks[-1] != "PEAK_RSS_KIB=", f"the crawl did not report its peak RSS: {stderr[-2000:]}"
    return Measured(await child.wait(), out.decode(), stderr, int(peaks[-1].partition("=")[2]) // 1024)
