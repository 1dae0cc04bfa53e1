"""pywb, the replay tool, in a virtual environment of its own (``.venv-pywb`` at the repository's
root): pywb 2.10 pins redis 2.x and fakeredis 0.x, older than eclaw's own ``redis`` extra, so it
cannot share eclaw's environment. Made from PyPI the first time a test needs it."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

ROOT = Path(__file__).parents[2]
VENV = ROOT / ".venv-pywb"
PYWB = "pywb==2.10.0"


def pywb_bin() -> Path:
    """The folder of pywb's commands (``wb-manager``, ``wayback``), installed if need be."""
    bin_dir = VENV / "bin"
    if (bin_dir / "wayback").exists():
        return bin_dir
    with (Path(tempfile.gettempdir()) / "eclaw-venv-pywb.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time (pytest-xdist workers)
        if not (bin_dir / "wayback").exists():
            _install()
    return bin_dir


def _install() -> None:
    shutil.rmtree(VENV, ignore_errors=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, capture_output=True)
        subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", PYWB],
                       check=True, capture_output=True, timeout=600)  # fmt: skip
    except (subprocess.SubprocessError, OSError) as exc:
        shutil.rmtree(VENV, ignore_errors=True)
        output = getattr(exc, "stderr", b"") or b""
        message = f"cannot install {PYWB} into {VENV}: {exc} {output.decode(errors='replace')[-500:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)  # CI reaches PyPI: a failure there is a real one
        pytest.skip(message)


def collection(root: Path, name: str, archives: list[Path]) -> None:
    """A pywb collection ``name`` under ``root`` holding ``archives``, indexed by their own CDXJ files."""
    bin_dir = pywb_bin()
    subprocess.run([str(bin_dir / "wb-manager"), "init", name], cwd=root, check=True, capture_output=True)
    folder = root / "collections" / name
    for archive in archives:
        shutil.copy(archive, folder / "archive" / archive.name)
        cdxj = archive.with_name(archive.name.removesuffix(".gz").removesuffix(".warc") + ".cdxj")
        shutil.copy(cdxj, folder / "indexes" / cdxj.name)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.asynccontextmanager
async def wayback(root: Path, command: list[str] | None = None) -> AsyncIterator[str]:
    """pywb's server on a free port of 127.0.0.1 (or ``command``, given the port), serving the
    collections under ``root``: its URL."""
    port = free_port()
    args = [str(pywb_bin() / "wayback"), "-p", str(port), "-b", "127.0.0.1"]
    if command is not None:
        args = [part.replace("{port}", str(port)) for part in command]
    process = await asyncio.create_subprocess_exec(
        *args, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        await _until_up(url, process)
        yield url
    finally:
        process.terminate()
        await process.wait()


async def _until_up(url: str, process: asyncio.subprocess.Process) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(600):  # a minute at most
            if process.returncode is not None:
                raise AssertionError(f"pywb exited: {(await process.stderr.read()).decode()[-2000:]}")  # type: ignore[union-attr]
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url + "/") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise AssertionError("pywb did not come up")
