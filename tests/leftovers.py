"""The autouse fixture that kills what a test forked from the fork server (tests/forkserver.py) and left
running (it failed, or timed out), as tests/conftest.py does for the ``eclaw`` processes a test started
itself. A test folder's conftest imports the one its tests need:

- :func:`no_forked_child_left`, after the test;
- :func:`no_forked_child_left_in_loop`, for a folder whose tests run in one event loop per module: the
  children's pipes are closed in that loop, still open.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests import forkserver

__all__ = ["no_forked_child_left", "no_forked_child_left_in_loop"]


@pytest.fixture(autouse=True)
def no_forked_child_left() -> Iterator[None]:
    yield
    forkserver.kill_leftovers()


@pytest.fixture(autouse=True)
async def no_forked_child_left_in_loop() -> AsyncIterator[None]:
    yield
    forkserver.kill_leftovers()
