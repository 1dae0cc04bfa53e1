"""A PostgreSQL cluster for the output tests copied from one made once per machine, not made anew.

``initdb`` (and the ``CREATE DATABASE`` after it) costs ~0.6 s of CPU each time; a copy of its result
~0.15. The first test process to need a cluster makes the template (under a lock, in a temporary
directory renamed into place when complete, so a process that died making it leaves no half of one);
every later one, the other Python versions of the same run among them, copies it. A cluster copied
is an ordinary one of its own (its own directory, port and server), as :class:`PostgresServer` makes.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from contextlib import AbstractContextManager
from pathlib import Path

from tests.outputs.postgres_server import PostgresServer, postgres_server

__all__ = ["copied_postgres_server"]


class _CopiedServer(PostgresServer):
    """A :class:`PostgresServer` whose :meth:`init` copies the template cluster instead of making one."""

    def init(self) -> None:
        template = _template(self.bin)
        subprocess.run(["cp", "-a", str(template), str(self.data)], check=True, timeout=120)  # keeps the owner
        self.start()


def _template(bin_dir: Path) -> Path:
    """The machine's template cluster for this PostgreSQL and user (made if missing): stopped cleanly,
    with the ``eclaw`` user and database."""
    version = bin_dir.parent.name  # /usr/lib/postgresql/VERSION/bin
    root = Path(tempfile.gettempdir())
    template = root / f"eclaw-pg-template-{version}-{os.geteuid()}"
    with (root / f"{template.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if not (template / "PG_VERSION").exists():
            making = Path(tempfile.mkdtemp(prefix="eclaw-pg-making-"))
            try:
                server = PostgresServer(making)
                server.init()
                server._run(str(server.bin / "pg_ctl"), "-D", str(server.data), "-m", "fast", "-w", "stop")
                shutil.rmtree(template, ignore_errors=True)
                os.rename(server.data, template)
            finally:
                subprocess.run(["rm", "-rf", str(making)], check=False)
    return template


def copied_postgres_server(directory: Path) -> AbstractContextManager[PostgresServer]:
    """As :func:`tests.outputs.postgres_server.postgres_server`, from a copy of the template cluster."""
    return postgres_server(directory, _CopiedServer)
