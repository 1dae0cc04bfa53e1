"""A fork server for the tests that run ``python -m eclaw ...`` as a real process (to kill it, signal
it, read its exit code and what it printed): one Python that has imported eclaw once, forking a
child for each command, which then runs ``eclaw``'s entry point exactly as ``python -m eclaw`` does.

A new interpreter spends ~0.35 s of CPU importing eclaw before it does anything; a fork costs a few
milliseconds. Each child is a process of its own: its pid, its session (``start_new_session``), its
standard streams, its working directory and environment, its exit code (a negative one when a signal
ended it) and the interpreter's normal shutdown, as ``asyncio.create_subprocess_exec`` gives. What it
shares with its siblings: the modules imported once in the server (their import-time work is not
redone) and the server's hash seed.

The server (this file run as a script) forks on each request of a test, sends back the child's pid,
then its exit code once it ends; a child whose test hung up on it (a test that failed or timed out)
is killed with its session. The server ends, killing what still runs, when the test process closes
its standard input (or dies). :func:`spawn` starts it at its first use in a test process."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

# what a crawl or a worker imports past ``eclaw.cli``: imported once in the server, not in each child
_WARM = (
    "eclaw.cli",
    "eclaw.alerts",
    "eclaw.monitors",
    "eclaw.processes.crawl",
    "eclaw.cluster.frontier",
    "eclaw.fetchers.plain",
    "eclaw.outputs.formats",
    "eclaw.outputs.local",
    "aiohttp.web",
    "redis.asyncio",
    "smtplib",
    "tomllib",
)


@dataclass(frozen=True, slots=True)
class _Request:
    """What a child runs: ``eclaw`` with ``argv`` in ``cwd`` with ``env``, on the standard streams ``fds``."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    session: bool
    fds: list[int]


class _Zygote:
    """The server: a Unix socket the tests ask on, and the children it forked for them."""

    def __init__(self, path: str) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(path)
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, ("accept", 0))
        self.selector.register(sys.stdin, selectors.EVENT_READ, ("stdin", 0))
        self.children: dict[int, tuple[socket.socket | None, int, bool]] = {}  # pid: its test's socket, pidfd, session

    def serve(self) -> _Request:
        """Serve until the test process hangs up; returns only in a forked child, with what it is to run."""
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        while True:
            for key, _ in self.selector.select():
                kind, pid = key.data
                if kind == "accept":
                    request = self.fork()
                    if request is not None:
                        return request
                elif kind == "exit":
                    self.exited(pid)
                elif kind == "hangup":  # the test gave up on a child still running
                    connection, pidfd, session = self.children[pid]
                    assert connection is not None
                    self.selector.unregister(connection)
                    connection.close()
                    self.children[pid] = (None, pidfd, session)
                    _kill(pid, session)
                else:  # the test process is done (or dead): so is every child
                    for pid, (_, _, session) in self.children.items():
                        _kill(pid, session)
                    for pid in self.children:
                        os.waitpid(pid, 0)
                    raise SystemExit(0)

    def fork(self) -> _Request | None:
        """Fork for the request waiting on the socket: in the child, the request; in the server, None."""
        connection, _ = self.listener.accept()
        message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
        asked = json.loads(message)
        pid = os.fork()
        if not pid:  # the child: nothing of the server's is left open in it
            self.selector.close()
            self.listener.close()
            for other, pidfd, _ in self.children.values():
                os.close(pidfd)
                if other is not None:
                    other.close()
            connection.close()
            return _Request(asked["argv"], asked["cwd"], asked["env"], asked["session"], fds)
        for fd in fds:
            os.close(fd)
        connection.sendall(str(pid).encode())
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (connection, pidfd, asked["session"])
        self.selector.register(pidfd, selectors.EVENT_READ, ("exit", pid))
        self.selector.register(connection, selectors.EVENT_READ, ("hangup", pid))
        return None

    def exited(self, pid: int) -> None:
        """Collect a child that ended and tell its test its exit code."""
        connection, pidfd, _ = self.children.pop(pid)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if connection is not None:
            self.selector.unregister(connection)
            with contextlib.suppress(OSError):  # the test hung up meanwhile
                connection.sendall(str(code).encode())
            connection.close()


def _kill(pid: int, session: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if session:
            os.killpg(pid, signal.SIGKILL)  # and the processes it forked
        else:
            os.kill(pid, signal.SIGKILL)


def _become(request: _Request, path: list[str]) -> None:
    """Make this forked child what ``python -m eclaw ARGV`` started in ``cwd`` with ``env`` would be."""
    if request.session:
        os.setsid()
    for target, fd in enumerate(request.fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    extra = [entry for entry in request.env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:] = [request.cwd, *extra, *path]
    sys.argv = [str(Path(sys.modules["eclaw"].__file__ or "eclaw").with_name("__main__.py")), *request.argv]



# -- the test's side -------------------------------------------------------------------------------

PIPE, STDOUT, DEVNULL = asyncio.subprocess.PIPE, asyncio.subprocess.STDOUT, asyncio.subprocess.DEVNULL
Stream = int | IO[Any] | None


class _Server:
    """The fork server of this test process, started at its first use, ended with the process."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="eclaw-forkserver-")
        self.path = os.path.join(self.folder, "socket")
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        self.process = subprocess.Popen(
            [sys.executable, __file__, self.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the fork server did not start (exit {self.process.wait()})")
        self.children: set[Child] = set()
        atexit.register(self.close)

    def close(self) -> None:
        """Kill what still runs and end the server (closing its standard input is its signal)."""
        for child in list(self.children):
            child.close()
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.stdout.close()
        self.process.wait(30)
        shutil.rmtree(self.folder, ignore_errors=True)


_server: list[_Server] = []  # this test process's, once started


class Child:
    """A process forked for ``eclaw ARGS``, used as an ``asyncio.subprocess.Process``: its
    ``returncode`` is set as soon as it ends."""

    def __init__(self, pid: int, connection: socket.socket, stdout: Any, stderr: Any, pipes: list[Any]) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdout: asyncio.StreamReader | None = stdout
        self.stderr: asyncio.StreamReader | None = stderr
        self._connection: socket.socket | None = connection
        self._pipes = pipes
        self._ended = asyncio.ensure_future(self._watch(connection))

    async def _watch(self, connection: socket.socket) -> None:
        """The server sends the exit code when the process ends."""
        said = await asyncio.get_running_loop().sock_recv(connection, 64)
        if not said:
            raise RuntimeError(f"the fork server ended before process {self.pid} did")
        self.returncode = int(said)
        self._hang_up()  # its pipes stay open until read to their end: they close themselves then

    async def wait(self) -> int:
        """Wait for the process to end; its exit code (negative: the signal that ended it)."""
        await asyncio.shield(self._ended)
        assert self.returncode is not None
        return self.returncode

    async def communicate(self) -> tuple[bytes, bytes]:
        """Read its standard output and error to their end, then wait for it to end."""

        async def read(stream: asyncio.StreamReader | None) -> bytes:
            return b"" if stream is None else await stream.read()

        out, err = await asyncio.gather(read(self.stdout), read(self.stderr))
        await self.wait()
        return out, err

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def close(self) -> None:
        """Hang up: a process still running is killed (with its session) by the server."""
        if not self._ended.done():
            with contextlib.suppress(RuntimeError):  # its loop is closed (a test that failed)
                self._ended.cancel()
        self._hang_up()
        for transport in self._pipes:
            with contextlib.suppress(RuntimeError):  # its loop is closed (a test that failed)
                transport.close()
        self._pipes = []

    def _hang_up(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        for server in _server:
            server.children.discard(self)


Process = Child | asyncio.subprocess.Process  # what the tests' helpers take


def _fd(stream: Stream, default: int) -> int:
    if stream is None:  # inherited, as a subprocess's
        return os.dup(default)
    if stream == DEVNULL:
        return os.open(os.devnull, os.O_WRONLY)
    return os.dup(stream if isinstance(stream, int) else stream.fileno())


async def spawn(
    *args: str,
    cwd: str | Path,
    env: dict[str, str] | None = None,
    stdout: Stream = None,
    stderr: Stream = None,
    start_new_session: bool = False,
) -> Child:
    """``python -m eclaw ARGS``, forked from the fork server: as ``asyncio.create_subprocess_exec``
    with the same arguments would start it (``PIPE``, ``DEVNULL``, ``STDOUT``, a file, or inherited)."""
    if not _server:
        _server.append(_Server())
    server, loop = _server[0], asyncio.get_running_loop()
    readers: list[asyncio.StreamReader | None] = [None, None]
    pipes, ends = [], []
    for n, stream in enumerate((stdout, stderr)):
        if stream == PIPE:
            read, write = os.pipe()
            readers[n] = asyncio.StreamReader(limit=1 << 20)
            reader = readers[n]
            transport, _ = await loop.connect_read_pipe(
                lambda reader=reader: asyncio.StreamReaderProtocol(reader), os.fdopen(read, "rb", 0)
            )
            pipes.append(transport)
            ends.append(write)
        elif n == 1 and stream == STDOUT:
            ends.append(os.dup(ends[0]))
        else:
            ends.append(_fd(stream, n + 1))
    fds = [os.open(os.devnull, os.O_RDONLY), *ends]
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        connection.connect(server.path)
        message = {"argv": list(args), "cwd": str(cwd), "env": dict(os.environ if env is None else env)}
        socket.send_fds(connection, [json.dumps({**message, "session": start_new_session}).encode()], fds)
    finally:
        for fd in fds:
            os.close(fd)
    connection.setblocking(False)
    said = await loop.sock_recv(connection, 64)
    if not said:
        connection.close()
        raise RuntimeError(f"the fork server did not fork eclaw {' '.join(args)}")
    pid = int(said)
    child = Child(pid, connection, readers[0], readers[1], pipes)
    server.children.add(child)
    return child


def kill_leftovers() -> None:
    """Kill the children a test left running (it failed, or timed out): what ``eclaw`` processes it
    started must not stay busy for the rest of the suite."""
    for server in _server:
        for child in list(server.children):
            child.close()


if __name__ == "__main__":
    import importlib

    for name in _WARM:
        importlib.import_module(name)
    base_path = sys.path[1:]  # without this script's folder, as a child's interpreter would have it
    request = _Zygote(sys.argv[1]).serve()
    _become(request, base_path)
    from eclaw.cli import command

    raise SystemExit(command())
