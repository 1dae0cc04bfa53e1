"""``-o ftp://user:password@host/path``: against a real pyftpdlib server on 127.0.0.1. A crawl stores
every item once at the end; a bad password or directory is one line, exit 2, the password never shown."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eclaw.testing import serve
from tests.outputs.servers import ftp_server
from tests.state.site import expected, make_app

ROOT = Path(__file__).parents[2]
SPIDER = str(ROOT / "tests" / "state" / "site.py") + ":StateSpider"
ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def ftp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("ftp")
    (root / "out").mkdir()
    logging.getLogger("pyftpdlib").setLevel(logging.WARNING)
    with ftp_server(str(root)) as address:
        yield address, root


def crawl(
    tmp: Path, spec: str, base: str = "http://127.0.0.1:1", env: dict[str, str] = ENV
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eclaw", "crawl", SPIDER, "-a", f"base_url={base}", "-o", spec, "-s", "store=",
         "-s", f"failures={tmp / 'failures.jsonl'}", "--log-level", "WARNING"],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


async def test_a_crawl_stores_every_item_once(ftp: tuple[str, Path], tmp_path: Path) -> None:
    address, root = ftp
    async with serve(make_app(delay=0)) as base:  # the crawl in a thread: the site runs on this loop
        result = await asyncio.to_thread(crawl, tmp_path, f"ftp://eclaw:s3cret@{address}/out/{{spider}}.jsonl", base)
    assert result.returncode == 0, result.stderr[-2000:]
    pages = [int(json.loads(line)["page"]) for line in (root / "out" / "state-site.jsonl").read_text().splitlines()]
    assert sorted(pages) == sorted(expected()[0])
    assert "s3cret" not in result.stderr


@pytest.mark.parametrize(
    ("path", "password", "said"),
    [("/out/x.jsonl", "wrong", "530"), ("/nosuch/x.jsonl", "s3cret", "550")],
)  # fmt: skip
def test_bad_password_or_directory_is_one_line_and_exit_2(
    ftp: tuple[str, Path], tmp_path: Path, path: str, password: str, said: str
) -> None:
    address, _ = ftp
    result = crawl(tmp_path, f"ftp://eclaw:{password}@{address}{path}")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"output ftp://eclaw:***@{address}{path}: {said}" in lines[0], lines
    assert password not in result.stderr


def test_ftps_delivers_over_tls_trusting_a_private_ca(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """``-o ftps://…``: the certificate is verified (a private CA trusted with SSL_CERT_FILE); the server
    requires TLS on control and data, and saw the file arrive over TLS."""
    from tests.outputs.servers import ftps_server
    from tests.proxies import self_signed

    certs = tmp_path_factory.mktemp("ftps-cert")
    self_signed(certs)
    root = tmp_path_factory.mktemp("ftps")
    (root / "out").mkdir()

    async def run(address: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        async with serve(make_app(delay=0)) as base:
            spec = f"ftps://eclaw:s3cret@{address}/out/{{spider}}.jsonl"
            return await asyncio.to_thread(crawl, tmp_path, spec, base, env)

    with ftps_server(str(root), str(certs / "cert.pem"), str(certs / "key.pem")) as (address, received):
        untrusted = asyncio.run(run(address, ENV))
        assert untrusted.returncode == 2 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr, untrusted.stderr
        result = asyncio.run(run(address, {**ENV, "SSL_CERT_FILE": str(certs / "cert.pem")}))
    assert result.returncode == 0, result.stderr[-2000:]
    pages = [int(json.loads(line)["page"]) for line in (root / "out" / "state-site.jsonl").read_text().splitlines()]
    assert sorted(pages) == sorted(expected()[0])
    assert [Path(f).name for f in received] == ["state-site.jsonl"]
