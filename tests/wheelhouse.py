"""A folder of wheels for an offline ``pip install --no-index --find-links``: the distributions this
interpreter has installed, packed back into wheels (an installed distribution is an unpacked wheel:
its files are listed in its RECORD, its tags in its WHEEL file), so a test can make a fresh
virtual environment without the network."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

_SKIP = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}  # what pip added when it installed it
ROOT = Path(__file__).resolve().parent.parent


def build_eclaw(folder: Path) -> Path:
    """eclaw's wheel, built into ``folder`` from a copy of this checkout's sources (in ``folder/src``).

    A build writes ``build/`` and ``eclaw.egg-info`` beside the sources it builds and removes what it wrote
    there: two builds in the checkout at once (two xdist workers, or the suites of ``make test``'s Pythons
    side by side) would remove each other's files."""
    source = folder / "src"
    for name in ("eclaw", "middlewares"):  # eclaw/middlewares is a link to ../middlewares: kept a link
        shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(folder)]
    subprocess.run([*command, str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = folder.glob("eclaw-*.whl")
    return wheel


def closure(names: Iterable[str], extras: Iterable[str] = ()) -> list[metadata.Distribution]:
    """The installed distributions ``names`` need, themselves included (markers evaluated here)."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(name, set(extras)) for name in names]
    while todo:
        name, wanted = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in found:
            continue
        dist = found[key] = metadata.distribution(name)
        for line in dist.requires or ():
            requirement = Requirement(line)
            environment = {"extra": next(iter(wanted), "")}
            if requirement.marker is None or requirement.marker.evaluate(environment):
                todo.append((requirement.name, set(requirement.extras)))
    return list(found.values())


def repack(dist: metadata.Distribution, folder: Path) -> Path:
    """``dist`` as a wheel in ``folder``."""
    info = next(f for f in dist.files or () if f.parts[0].endswith(".dist-info"))
    wheel_file = dist.read_text("WHEEL") or ""
    tag = next(line.split(":", 1)[1].strip() for line in wheel_file.splitlines() if line.startswith("Tag:"))
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    target = folder / f"{name}-{dist.version}-{tag}.whl"
    record = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as wheel:
        for file in dist.files or ():
            path = str(file)
            added_by_pip = file.parent == info.parent and file.name in _SKIP
            if path.startswith("..") or "__pycache__" in file.parts or added_by_pip:
                continue
            data = Path(str(dist.locate_file(file))).read_bytes()
            wheel.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{info.parent}/RECORD,,")
        wheel.writestr(f"{info.parent}/RECORD", "\n".join(record) + "\n")
    return target
