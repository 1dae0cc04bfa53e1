"""The processes a command forked (Linux's /proc): for the tests that kill one of them."""

from __future__ import annotations

import asyncio
from pathlib import Path


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def group_running(*groups: int) -> bool:
    """Whether a process of one of the process groups ``groups`` still runs (a zombie, ended but not yet
    reaped, holds no file and no lock: it does not count)."""
    wanted = {str(group) for group in groups}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and fields[2] in wanted:
            return True
    return False


async def forked(pid: int, count: int) -> list[int]:
    """The ``count`` processes ``pid`` forks, once they are all up."""
    deadline = asyncio.get_running_loop().time() + 60  # generous: a loaded machine forks late
    while asyncio.get_running_loop().time() < deadline:
        found = await asyncio.to_thread(children_of, pid)
        if len(found) >= count:
            return sorted(found)
        await asyncio.sleep(0.05)
    raise AssertionError(f"process {pid} never had {count} children")
