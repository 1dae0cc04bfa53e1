"""A job's arguments never reach a command line (``/proc/PID/cmdline``, which ``ps`` shows to every
user): the service hands them to the job's process on its stdin (eclaw/service/launch.py); the
spider still gets the real values, and no file of the job holds a secret one."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eclaw.service import launch
from tests.service.forked_service import ForkedService
from tests.service.helpers import Service, site, wait_for

SPIDER = '''
import hashlib

from eclaw import Spider


class Vault(Spider):
    name = "vault"
    secret_args = ("pin",)

    def parse(self, response):
        if "/slow/" in response.url:  # proof of the values it got, with neither of them in the item
            yield {"url": response.url, "pin": hashlib.sha256(self.pin.encode()).hexdigest(),
                   "token": hashlib.sha256(self.api_token.encode()).hexdigest(), "note": self.note}
        yield from response.follow_all(css="a")
'''
PIN, TOKEN, NOTE = "pin-7c1e9a0b55", "tok-2f8d61c4e3", "plain-note-4411"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with site(delay=0.2) as url:
        yield url


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    project = tmp_path_factory.mktemp("vault")
    (project / "vault.py").write_text(SPIDER)
    service = ForkedService(project).start()
    yield service
    service.drain()
    service.stop()


def _cmdlines() -> dict[int, bytes]:
    """The command line of every process of the machine."""
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                found[int(proc.name)] = (proc / "cmdline").read_bytes()
            except OSError:  # ended meanwhile
                continue
    return found


def _files(folder: Path) -> Iterator[tuple[Path, bytes]]:
    for path in folder.rglob("*"):
        if path.is_file():
            yield path, path.read_bytes()


def test_arguments_are_on_no_command_line_and_reach_the_spider(service: Service, base: str) -> None:
    args = {"start_urls": f"{base}/?count=300", "pin": PIN, "api_token": TOKEN, "note": NOTE}
    status, job = service.call("POST", "/api/jobs", {"spider": "vault", "args": args})
    assert status == 201 and job["args"]["pin"] == "***" and job["args"]["api_token"] == "***"
    assert job["args"]["note"] == NOTE  # not a secret: shown, but not on the command line either
    running = wait_for(lambda: (r := service.call("GET", f"/api/jobs/{job['id']}")[1])["items"] >= 2 and r, 30, "items")
    pid = running["pid"]
    lines = _cmdlines()
    assert b"eclaw.service.launch\x00crawl\x00vault.py:Vault" in lines[pid]  # the job's own process, running
    for secret in (PIN, TOKEN, NOTE):
        assert [p for p, line in lines.items() if secret.encode() in line] == [], secret
    assert PIN.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
    items = service.call("GET", f"/api/jobs/{job['id']}/items?limit=5")[1]["items"]
    assert {item["pin"] for item in items} == {hashlib.sha256(PIN.encode()).hexdigest()}  # the real values
    assert {item["token"] for item in items} == {hashlib.sha256(TOKEN.encode()).hexdigest()}
    assert {item["note"] for item in items} == {NOTE}
    service.call("POST", f"/api/jobs/{job['id']}/cancel")
    done = wait_for(lambda: (r := service.call("GET", f"/api/jobs/{job['id']}")[1])["state"] == "cancelled" and r, 30)
    assert done["returncode"] == 0  # a graceful stop, its state saved
    leaks = [str(p) for p, data in _files(service.project / ".eclaw-serve") if PIN.encode() in data or TOKEN.encode()
             in data]  # fmt: skip
    assert leaks == []


@pytest.mark.parametrize("given", [b"[1]", b'{"args": {"a": 1}}', b"{"])
def test_bad_arguments_on_stdin_are_one_line_and_exit_2(
    given: bytes, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The launcher's ``main`` in this process, its stdin ``given`` (the process itself: the test below)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(given)))
    monkeypatch.setattr(sys, "argv", ["launch", "crawl", "nothing.py"])
    assert launch.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("eclaw: error: the job's arguments on stdin: ") and err.count("\n") == 1


def test_oversize_arguments_on_the_stdin_of_the_process_are_one_line_and_exit_2(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "eclaw.service.launch", "crawl", "nothing.py"]
    given = b"x" * ((1 << 20) + 1)
    result = subprocess.run(command, input=given, capture_output=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert result.stderr.decode().startswith("eclaw: error: the job's arguments on stdin: over ")
    assert result.stderr.decode().count("\n") == 1
