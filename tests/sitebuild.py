"""The documentation site built once per machine and content: the suites of every Python (run side by
side by ``make test``) and ``make docs`` take the same strict ``mkdocs build``, not one each (~18 s of
CPU a build).

A build is kept under ``/tmp/eclaw-docs/<key>``, ``key`` a hash of what the build reads: mkdocs.yml,
every file under docs/, eclaw's sources (the API reference's docstrings, the CLI's and the settings'
pages), the versions of the docs tools and the build's options. Under an ``fcntl`` lock on
``<key>.lock``, the first to ask builds into a temporary folder beside it and renames it into place
only once mkdocs succeeded: a half written or failed build is never there to take; the others wait on
the lock, then take it. A failed build is not kept: each asker builds again (and fails the same way,
with mkdocs' error).

Run as a script (``python -m tests.sitebuild DEST``), it puts the site in ``DEST`` (``make docs``:
``site/``) from the same shared build.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["BuildFailed", "shared_site"]

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(tempfile.gettempdir()) / "eclaw-docs"
TOOLS = ("mkdocs", "mkdocs-material", "mkdocstrings", "mkdocstrings-python", "griffe", "mkdocs-gen-files")
BUILD = ("build", "--strict")  # not --quiet: it drops the warnings before strict mode counts them
STALE = 24 * 3600.0  # another content's build untouched this long is removed when a new one is made


class BuildFailed(Exception):
    """``mkdocs build --strict`` failed: its error output."""


def content_key(root: Path = ROOT) -> str:
    """A hash of everything the build reads, and of the versions of the tools that build it."""
    digest = hashlib.sha256(" ".join(BUILD).encode() + b"\0")
    files = [root / "mkdocs.yml", *(root / "docs").rglob("*"), *(root / "eclaw").rglob("*.py")]
    for path in sorted(p for p in files if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    for tool in TOOLS:
        try:
            digest.update(f"{tool}={importlib.metadata.version(tool)}\0".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{tool}=none\0".encode())
    return digest.hexdigest()[:24]


def shared_site(mkdocs: Path, root: Path = ROOT, cache: Path = CACHE) -> Path:
    """The strictly built site of ``root`` as it is now: built by ``mkdocs`` if no one has built this
    content yet, else the build another suite made (waiting for it if it is under way)."""
    cache.mkdir(parents=True, exist_ok=True)
    key = content_key(root)
    site = cache / key
    with (cache / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if (site / "index.html").is_file():
            site.touch()  # in use: not stale
            return site
        building = Path(tempfile.mkdtemp(prefix=f"{key}.", suffix=".building", dir=cache))
        try:
            built = subprocess.run(
                [str(mkdocs), *BUILD, "-d", str(building)],
                cwd=root,
                capture_output=True,
                text=True,
                env={**os.environ, "DISABLE_MKDOCS_2_WARNING": "true"},  # a plug-in's banner about MkDocs 2
            )
            if built.returncode != 0:
                lines = built.stderr.splitlines()  # the plug-ins' banners left out
                said = [line for line in lines if line.startswith(("WARNING", "ERROR", "Error", "Aborted"))]
                raise BuildFailed("mkdocs build failed:\n" + "\n".join(said or lines[-20:]))
            building.rename(site)
        finally:
            shutil.rmtree(building, ignore_errors=True)  # gone already once renamed
    _remove_stale(cache, keep=key)
    return site


def _remove_stale(cache: Path, keep: str) -> None:
    """Other contents' builds (and leftovers of a killed build) not used for a day."""
    now = time.time()
    for path in cache.iterdir():
        if not path.name.startswith(keep) and now - path.stat().st_mtime > STALE:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    """``python -m tests.sitebuild DEST``: the shared build copied to ``DEST`` (replaced)."""
    if len(argv) != 1:
        print("usage: python -m tests.sitebuild DEST", file=sys.stderr)
        return 2
    try:
        site = shared_site(Path(sys.executable).parent / "mkdocs")
    except BuildFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    dest = Path(argv[0])
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(site, dest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
