"""Guards of docs/processes.md: a host paced as a whole (a ``download_delay``, a ``host_delay`` for it,
or fewer connections than processes) belongs to one process, and lending never lends it to an idle
one: its politeness stays exactly one process's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eclaw.testing import serve
from tests.state import lopsided
from tests.state.test_lending import Site, crawl, items
from tests.state.test_processes import finished


@pytest.mark.parametrize("paced", ["download_delay=0.005", "host_delay=127.0.0.1=0.005", "concurrency_per_domain=1"])
async def test_a_host_paced_as_a_whole_is_never_lent_to_the_idle_process(tmp_path: Path, paced: str) -> None:
    site = Site()  # every entry answers at once: the other process has nothing and asks for work
    async with serve(site.app()) as base:
        site.base = base
        out = await finished(await crawl(site, tmp_path, "-s", paced), "the crawl")
    found = items(tmp_path)
    assert sorted(int(str(item["n"])) for item in found) == list(range(lopsided.ENTRIES)), out  # each once
    assert len({item["pid"] for item in found}) == 1, out  # one process fetched and parsed the whole host
    lent = re.search(r"requests lent to another process\s+(\d+)", out)
    assert lent is None or lent.group(1) == "0", out
