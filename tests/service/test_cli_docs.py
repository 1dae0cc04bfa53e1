"""Every ``$ eclaw …`` line of docs/api.md and docs/operations.md runs: the client commands against a
real service (in the page's order, so the job and schedule ids are the page's), ``eclaw serve`` by
its parser; a line followed by ``eclaw: error: …`` must print exactly that and exit 2."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from eclaw.cli.main import parser
from tests.inprocess import eclaw_inprocess
from tests.service.forked_service import ForkedService
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
    service = ForkedService(project).start()
    yield service
    service.drain()
    service.stop()


async def test_client_examples_run(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line run by the CLI's main in this process (a client command: what it says and its exit
    code are the point, not its process), with the environment the page's reader has set."""
    monkeypatch.setenv("ECLAW_SERVER", service.url)
    monkeypatch.delenv("ECLAW_SERVE_TOKEN", raising=False)
    examples = commands("api.md")
    assert len(examples) >= 15
    with site(delay=0.01) as base:
        for line, error in examples:
            argv = shlex.split(line.replace("http://127.0.0.1:8000/", f"{base}/?count=3"))
            assert argv[0] == "eclaw", line
            code, _, stderr = await eclaw_inprocess(*argv[1:], wait=60)
            if error:
                assert (code, stderr.strip()) == (2, error), line
            else:
                assert code == 0, f"{line}: {stderr}"
        service.drain()


def test_serve_examples_parse() -> None:
    examples = commands("operations.md")
    assert examples
    for line, _ in examples:
        args = parser().parse_args(shlex.split(line)[1:])
        assert args.command == "serve" and args.project == "myproject"
