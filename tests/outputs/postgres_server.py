"""A real PostgreSQL (Debian's ``postgresql`` package) on a free loopback port, for the output tests.

``initdb`` makes a cluster in a temporary directory; ``postgres`` serves it on 127.0.0.1 (password
authentication, user ``eclaw`` / ``s3cret``) with its unix socket in that directory. PostgreSQL refuses
to run as root (CI runs the tests as root): then it runs as the ``postgres`` system user the Debian
package creates, the directory given to it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

USER, PASSWORD = "eclaw", "s3cret"


def postgres_bin() -> Path:
    """The folder of the PostgreSQL server's binaries (``initdb``, ``pg_ctl``, ``postgres``)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        if os.environ.get("CI") == "true":
            pytest.fail("PostgreSQL is missing: make test-servers installs it (apt-get install postgresql)")
        pytest.skip("PostgreSQL not installed (apt-get install postgresql)")
    return Path(found[-1]).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster in ``directory``; ``start``/``stop`` may be called again (a restart)."""

    def __init__(self, directory: Path) -> None:
        self.bin = postgres_bin()
        self.directory = directory
        self.data = directory / "data"
        self.port = free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:  # postgres will not run as root: as the Debian package's system user
            account = pwd.getpwnam("postgres")
            shutil.chown(directory, account.pw_uid, account.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def url(self, database: str = "eclaw", *, password: str = PASSWORD, port: int | None = None) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{port or self.port}/{database}"

    def _run(self, *command: str) -> None:
        done = subprocess.run([*self._as, *command], capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {done.stderr or done.stdout}")

    def init(self) -> None:
        secret = self.directory / "pw"
        secret.write_text(PASSWORD)
        if self._as:
            shutil.chown(secret, "postgres")
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", USER, "--pwfile", str(secret),
            "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync",
        )  # fmt: skip
        self.start()
        self.sql("CREATE DATABASE eclaw")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = self.directory / "log"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-o", options, "-w", "start")

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def running(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
        except OSError:
            return False
        return True

    def sql(self, query: str, database: str = "postgres") -> list[tuple[object, ...]]:
        """Run ``query`` (autocommit); its rows (empty for a statement)."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn, conn.cursor() as cursor:
            cursor.execute(query.encode())
            return list(cursor.fetchall()) if cursor.description else []


@contextmanager
def postgres_server(directory: Path, kind: type[PostgresServer] = PostgresServer) -> Iterator[PostgresServer]:
    server = kind(directory)
    server.init()
    try:
        yield server
    finally:
        if server.running():
            server.stop()


def wait_until(condition: object, seconds: float = 60) -> None:
    """Poll ``condition()`` until true (a deadline, never a fixed sleep)."""
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for a condition")
        time.sleep(0.05)
