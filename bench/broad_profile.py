"""Where a broad crawl's CPU goes: py-spy samples of the crawler, summarised by component
(bench/profile.py's groups), by function (self time) and by eclaw function (inclusive time)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from bench.profile import classify

STARTUP = 3  # seconds: py-spy attaches once the interpreter is up
_LINE = re.compile(r":\d+\)$")


def sample(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    """py-spy recording ``pid`` (raw format, 100 Hz, not pausing it) for the window."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    record = [py_spy, "record", "--pid", str(pid), "--duration", str(int(seconds - STARTUP))]
    record += ["--rate", "100", "--nonblocking", "--format", "raw", "--output", str(out)]
    return subprocess.Popen(
        ["sh", "-c", f"sleep {STARTUP} && exec {shlex.join(record)}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _function(frame: str) -> str:
    """``name (path:line)`` without the line and with the path cut to its last two parts."""
    name, _, where = _LINE.sub(")", frame).partition(" (")
    return f"{name} ({'/'.join(where.rstrip(')').split('/')[-2:])})"


def summarize(raw: Path, top: int = 25) -> dict[str, Any]:
    """Shares of the samples: by component, the top functions by self time, the top eclaw
    functions by inclusive time (each counted once per stack)."""
    if not raw.exists():
        return {"error": f"no profile at {raw} (py-spy failed?)"}
    groups: Counter[str] = Counter()
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        n = int(count)
        total += n
        groups[classify(frames[-1])] += n
        own[_function(frames[-1])] += n
        for name in {_function(f) for f in frames if "(eclaw/" in f or "/eclaw/" in f}:
            inclusive[name] += n

    def shares(counter: Counter[str], limit: int) -> dict[str, float]:
        return {name: round(100 * n / max(total, 1), 1) for name, n in counter.most_common(limit)}

    return {
        "samples": total,
        "by_component_pct": shares(groups, len(groups)),
        "self_pct": shares(own, top),
        "eclaw_inclusive_pct": shares(inclusive, top),
    }
