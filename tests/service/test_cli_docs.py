"""Every ``$ eclaw …`` line of docs/api.md and docs/operations.md runs: the client commands against a
real service (in the page's order, so the job and schedule ids are the page's), ``eclaw serve`` by
its parser; a line followed by ``eclaw: error: …`` must print exactly that and exit 2."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eclaw.cli.main import parser
from tests.service.helpers import SPIDERS, Service, site, write_project

DOCS = Path(__file__).resolve().parents[2] / "docs"


def commands(page: str) -> list[tuple[str, str | None]]:
    """The ``$ eclaw`` lines of the page's console blocks, each with the error line it shows (if any)."""
    found: list[tuple[str, str | None]] = []
    inside = False
    lines = (DOCS / page).read_text().splitlines()
    for index, line in enumerate(lines):
        if line.startswith("```"):
            inside = line == "```console"
        elif inside and line.startswith("$ eclaw "):
            following = lines[index + 1] if index + 1 < len(lines) else ""
            found.append((line[2:], following if following.startswith("eclaw: error:") else None))
    return found


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    project = write_project(tmp_path_factory.mktemp("myproject"))
    (project / "broken.py").unlink()
    (project / "spiders.py").write_text(SPIDERS.replace("class Slow", "class Books").replace('"slow"', '"books"'))
    service = Service(project).start()
    yield service
    service.drain()
    service.stop()


def test_client_examples_run(service: Service) -> None:
    env = {**os.environ, "ECLAW_SERVER": service.url}
    env.pop("ECLAW_SERVE_TOKEN", None)
    examples = commands("api.md")
    assert len(examples) >= 15
    with site(delay=0.01) as base:
        for line, error in examples:
            argv = shlex.split(line.replace("http://127.0.0.1:8000/", f"{base}/?count=3"))
            result = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, env=env, timeout=60)
            if error:
                assert (result.returncode, result.stderr.strip()) == (2, error), line
            else:
                assert result.returncode == 0, f"{line}: {result.stderr}"
        service.drain()


def test_serve_examples_parse() -> None:
    examples = commands("operations.md")
    assert examples
    for line, _ in examples:
        args = parser().parse_args(shlex.split(line)[1:])
        assert args.command == "serve" and args.project == "myproject"
