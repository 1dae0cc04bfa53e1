"""``ftp://user:password@host/dir/items.jsonl`` and ``ftps://`` (explicit TLS, ``AUTH TLS``): uploaded at the end.

The standard library's :mod:`ftplib` speaks the protocol. FTPS verifies the server's certificate and
host name against the system's trusted CAs (``ssl.create_default_context``): a private CA is trusted
with ``SSL_CERT_FILE=/path/ca.pem`` (or ``SSL_CERT_DIR``), as for every OpenSSL client.
Bytes go into a local spool (:func:`~eclaw.outputs.spool.spool_path`: in the
crawl's state directory) as the crawl runs; a checkpoint
syncs it to disk; :meth:`FtpSink.finish` stores the whole file on the server (``STOR``, replacing
what is there). A killed run's spool is cut back to its checkpoint and continued. An FTP server
cannot take back a file stored half-way, so the sink says ``exactly_once = False``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ftplib
import os
import posixpath
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from eclaw.exceptions import ConfigError
from eclaw.outputs.api import Destination, OutputSpec, Sink
from eclaw.outputs.spool import Spool, staging_file
from eclaw.security.redact import redact_url

__all__ = ["FTP", "FtpDestination", "FtpSink"]

TIMEOUT = 15.0


def _connect(location: str) -> ftplib.FTP:
    url = urlsplit(location)
    tls = url.scheme == "ftps"
    # ftplib's own FTP_TLS default context checks no certificate: the default one checks it and the host name
    ftp: ftplib.FTP = (
        ftplib.FTP_TLS(timeout=TIMEOUT, context=ssl.create_default_context()) if tls else ftplib.FTP(timeout=TIMEOUT)
    )
    try:
        ftp.connect(url.hostname or "", url.port or 21)
        ftp.login(unquote(url.username or "anonymous"), unquote(url.password or ""))
        if isinstance(ftp, ftplib.FTP_TLS):
            ftp.prot_p()  # the data connection encrypted too
    except BaseException:
        ftp.close()
        raise
    return ftp


def _reason(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return redact_url(text)


def _path(location: str) -> str:
    path = unquote(urlsplit(location).path)
    if not path or path.endswith("/"):
        raise ConfigError(f"output {redact_url(location)}: an FTP location is ftp://[USER[:PASSWORD]@]HOST/PATH")
    return path


class FtpSink(Spool):
    """One remote file: a local spool, stored whole at the end."""

    exactly_once = False

    async def commit(self) -> dict[str, Any]:
        await self._sync()
        return {"size": self._size}

    async def resume(self, saved: dict[str, Any]) -> None:
        self._cut_back(int(saved["size"]))

    def _store(self) -> None:
        ftp = _connect(self.location)
        try:
            with open(self.spool, "rb") as file:
                ftp.storbinary(f"STOR {_path(self.location)}", file)
        finally:
            ftp.close()

    async def finish(self) -> None:
        assert self._fd is not None, "sink closed"
        await asyncio.to_thread(os.fsync, self._fd)
        try:
            await asyncio.to_thread(self._store)
        except (OSError, ftplib.Error, EOFError) as error:  # the spool stays: a resumed run stores it
            raise OSError(f"output {redact_url(self.location)}: {_reason(error)}") from None
        os.close(self._fd)
        self._fd = None
        self.spool.unlink(missing_ok=True)


class FtpDestination:
    """The files of one ``ftp://`` or ``ftps://`` spec."""

    def check(self, location: str) -> None:
        directory = posixpath.dirname(_path(location)) or "/"
        try:
            ftp = _connect(location)
            try:
                ftp.cwd(directory)
            finally:
                ftp.close()
        except (OSError, ftplib.Error, EOFError) as error:
            raise ConfigError(f"output {redact_url(location)}: {_reason(error)}") from None

    def open(self, location: str, spool: Path) -> Sink:
        return FtpSink(location, spool, truncate=True)

    def reopen(self, location: str, spool: Path) -> Sink:
        return FtpSink(location, spool, truncate=False)

    def remove(self, location: str) -> bool:
        try:
            ftp = _connect(location)
            try:
                ftp.delete(_path(location))
            finally:
                ftp.close()
        except (OSError, ftplib.Error, EOFError):
            return False
        return True

    def staging_path(self, location: str) -> Path:
        return staging_file(location)

    async def upload(self, staged: Path, location: str) -> None:
        def store() -> None:
            ftp = _connect(location)
            try:
                _make_dirs(ftp, posixpath.dirname(_path(location)))
                with open(staged, "rb") as file:
                    ftp.storbinary(f"STOR {_path(location)}", file)
            finally:
                ftp.close()

        try:
            await asyncio.to_thread(store)
        except (OSError, ftplib.Error, EOFError) as error:
            raise OSError(f"output {redact_url(location)}: {_reason(error)}") from None


def _make_dirs(ftp: ftplib.FTP, directory: str) -> None:
    """Create ``directory`` and its missing parents (a files store's ``full/ab/``)."""
    made = ""
    for part in filter(None, directory.split("/")):
        made = f"{made}/{part}" if made or directory.startswith("/") else part
        with contextlib.suppress(ftplib.error_perm):  # there already (or not ours to make: STOR says so)
            ftp.mkd(made)


class _Factory:
    def make(self, spec: OutputSpec) -> Destination:
        return FtpDestination()


FTP = _Factory()
