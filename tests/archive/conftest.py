from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests import forkserver


@pytest.fixture(autouse=True)
async def _no_forked_crawl_left_behind() -> AsyncIterator[None]:
    """The ``eclaw`` processes a test forked from the fork server (tests/forkserver.py) and left running
    (it failed, or timed out) are killed when it ends, as tests/conftest.py does for those it started
    (in the test's event loop, still open: their pipes are closed in it)."""
    yield
    forkserver.kill_leftovers()
