from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import forkserver


@pytest.fixture(autouse=True)
def _no_forked_crawl_left_behind() -> Iterator[None]:
    """The ``eclaw`` processes a test forked from the fork server (tests/forkserver.py) and left running
    (it failed, or timed out) are killed when it ends, as tests/conftest.py does for those it started."""
    yield
    forkserver.kill_leftovers()
