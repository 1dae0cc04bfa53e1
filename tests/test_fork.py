"""The parent's wait for its forked processes (``eclaw/processes/fork.py``): every exit code in order,
with a pidfd per process (Linux) or by looking every so often (elsewhere), and no hang for a process
another part of the program already collected."""

from __future__ import annotations

import asyncio
import os

import pytest

from eclaw.processes.fork import fork, wait_for

# Python 3.12+ warns of a fork in a process with threads (the test runner may have some): the children
# here only return a number.
pytestmark = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")


@pytest.mark.parametrize("pidfds", [True, False], ids=["pidfds", "polled"])
def test_the_wait_gives_every_exit_code_in_order(monkeypatch: pytest.MonkeyPatch, pidfds: bool) -> None:
    if not pidfds:
        monkeypatch.delattr(os, "pidfd_open", raising=False)  # as on a system without them
    pids = [fork(lambda: 3), fork(lambda: 0), fork(lambda: 7)]
    assert asyncio.run(asyncio.wait_for(wait_for(pids), 20)) == [3, 0, 7]


def test_a_process_collected_elsewhere_does_not_hang_the_wait() -> None:
    gone = fork(lambda: 0)
    os.waitpid(gone, 0)  # its exit code is taken before the wait begins
    other = fork(lambda: 5)
    assert asyncio.run(asyncio.wait_for(wait_for([gone, other]), 20)) == [1, 5]
