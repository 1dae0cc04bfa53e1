"""Processes forked from a parent that has loaded the spider (so they import nothing again), and the
parent's wait for them: used by ``eclaw crawl --processes N`` (:mod:`~eclaw.processes.part`) and
``eclaw worker --processes N`` (several cluster workers from one command)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
import traceback
from collections.abc import Callable

__all__ = ["SIGNALS", "fork", "wait_for"]

SIGNALS = {signal.SIGINT, signal.SIGTERM}
_PR_SET_PDEATHSIG = 1
_POLL = 0.02  # seconds between two looks for ended processes, where there is no pidfd


def fork(run: Callable[[], int]) -> int:
    """Start a process that runs ``run`` (its return value the exit code) in a session of its own (a
    terminal's Ctrl-C reaches the parent, which passes it on); its pid, once the process is in its session.
    Its standard output goes nowhere: the parent prints the summary. Call it with SIGINT and SIGTERM
    blocked, and no event loop running: the process starts with them blocked, so ``run`` must unblock them
    once it handles them (:func:`eclaw.cli.crawl.crawl_with_signals` does). One passed on before that waits
    for the handler, where it would otherwise kill the process as it starts."""
    parent = os.getpid()
    ready, told = os.pipe()
    pid = os.fork()
    if pid:
        os.close(told)
        os.read(ready, 1)  # in its session (or ended): nothing sent to the parent's group reaches it now
        os.close(ready)
        return pid
    code = 1
    try:
        os.close(ready)
        os.setsid()
        _forget_group_signals()
        os.close(told)
        with contextlib.suppress(OSError, AttributeError):  # killed with the parent, even by kill -9 (Linux)
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == parent:  # else the parent died before that was asked: nothing to run for
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            code = run()  # with SIGINT and SIGTERM still blocked: its handlers unblock them once set
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def _forget_group_signals() -> None:
    """Drop a SIGINT or SIGTERM that reached the new process through the parent's group, before it had a
    session of its own: the parent got it too and passes it on once this process is in its session (the
    parent waits for that); kept, it would count as a second one, which stops a crawl at once."""
    while signal.sigtimedwait(SIGNALS, 0) is not None:
        pass


async def wait_for(pids: list[int]) -> list[int]:
    """Wait for the processes ``pids``, passing each SIGINT or SIGTERM the parent gets on to those still
    running (a first asks them to stop, a second to stop at once); their exit codes, in order. Each
    process's end is seen at once through its pidfd (Linux 5.3+), elsewhere within ``_POLL`` seconds."""
    loop = asyncio.get_running_loop()
    codes: dict[int, int] = {}
    ended = asyncio.Event()
    pidfds = _pidfds(pids)

    def reap(pid: int) -> None:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
            code = os.waitstatus_to_exitcode(status)
        except ChildProcessError:  # collected elsewhere: its code is lost
            done, code = pid, 1
        if done:
            codes[pid] = code
            if pid in pidfds:
                loop.remove_reader(pidfds[pid])
            if len(codes) == len(pids):
                ended.set()

    def poll() -> None:
        for pid in pids:
            if pid not in codes:
                reap(pid)
        if not ended.is_set():
            loop.call_later(_POLL, poll)

    def forward(signum: int) -> None:
        for pid in pids:
            if pid not in codes:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)

    for pid, pidfd in pidfds.items():
        loop.add_reader(pidfd, reap, pid)
    if not pidfds:
        poll()
    for signum in SIGNALS:
        loop.add_signal_handler(signum, forward, signum)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)  # one that came while they started is handled now
    try:
        await ended.wait()
    finally:
        for signum in SIGNALS:
            loop.remove_signal_handler(signum)
        for pid, pidfd in pidfds.items():
            if pid not in codes:
                loop.remove_reader(pidfd)
            os.close(pidfd)
    return [codes[pid] for pid in pids]


def _pidfds(pids: list[int]) -> dict[int, int]:
    """A pidfd for each process (readable once it ended), or none where the system has none."""
    pidfds: dict[int, int] = {}
    try:
        for pid in pids:
            pidfds[pid] = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, a kernel before 5.3, or a sandbox refusing it: polled
        for pidfd in pidfds.values():
            os.close(pidfd)
        return {}
    return pidfds
