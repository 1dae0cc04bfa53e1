"""Packaging: the pinned public API, and the wheel (demo works without spiders/)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import eclaw
import eclaw.events
import eclaw.middlewares

ROOT = Path(__file__).resolve().parent.parent


def test_public_api_is_pinned() -> None:
    assert eclaw.__all__ == [
        "CloseSpider",
        "ConfigError",
        "DropItem",
        "EclawError",
        "Engine",
        "IgnoreRequest",
        "Request",
        "Response",
        "Settings",
        "Spider",
        "Stats",
        "__version__",
        "run",
    ]
    assert eclaw.__all__ == sorted(eclaw.__all__)
    for name in eclaw.__all__:
        assert hasattr(eclaw, name)


def test_namespaces() -> None:
    assert "RequestGenerated" in eclaw.events.__all__
    assert eclaw.middlewares.__all__ == [
        "BROWSERS",
        "DefaultHeaders",
        "Defaults",
        "HttpCache",
        "Ladder",
        "Proxy",
        "Retry",
        "Robots",
        "Sessions",
        "Throttle",
        "UserAgent",
        "defaults",
    ]


@pytest.fixture(scope="module")
def wheel(eclaw_wheel: Path) -> Path:
    return eclaw_wheel


def test_wheel_layout(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "eclaw/py.typed" in names
    assert "eclaw/middlewares/__init__.py" in names
    assert "eclaw/demo/shop.py" in names
    assert not any(name.startswith(("spiders/", "middlewares/", "tests/")) for name in names)
    shop = zipfile.ZipFile(wheel).read("eclaw/demo/shop.py")
    assert shop == (ROOT / "spiders" / "shop.py").read_bytes()


def test_demo_runs_from_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    # one Python for both checks: where eclaw is imported from, then ``eclaw demo`` run as ``python -m eclaw
    # demo`` runs it (runpy, the wheel's eclaw/__main__.py)
    done = subprocess.run(
        [sys.executable, "-c", DEMO_FROM_WHEEL], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith(str(target))
    assert len((work / "demo-items.jsonl").read_text().splitlines()) == 500


DEMO_FROM_WHEEL = """
import runpy, sys
import eclaw
print(eclaw.__file__, flush=True)
sys.argv[1:] = ["demo"]
runpy.run_module("eclaw", run_name="__main__", alter_sys=True)
"""
