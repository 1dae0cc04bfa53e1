"""``-o ftp://user:password@host/path``: against a real pyftpdlib server on 127.0.0.1. A crawl stores
every item once at the end; a bad password or directory is one line, exit 2, the password never shown."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from eclaw.testing import serve
from tests.outputs.forked import eclaw_forked
from tests.outputs.servers import ftp_server
from tests.outputs.state_part import SPIDER, expected, make_app

ROOT = Path(__file__).parents[2]
ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def ftp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("ftp")
    (root / "out").mkdir()
    logging.getLogger("pyftpdlib").setLevel(logging.WARNING)
    with ftp_server(str(root)) as address:
        yield address, root


async def crawl(
    tmp: Path, spec: str, base: str = "http://127.0.0.1:1", env: dict[str, str] = ENV
) -> tuple[int, str]:
    """``eclaw crawl`` of the state site to ``spec``: its exit code and stderr."""
    code, _, stderr = await eclaw_forked(
        "crawl", SPIDER, "-a", f"base_url={base}", "-o", spec, "-s", "store=",
        "-s", f"failures={tmp / 'failures.jsonl'}", "--log-level", "WARNING", cwd=tmp, env=env,
    )  # fmt: skip
    return code, stderr


async def test_a_crawl_stores_every_item_once(ftp: tuple[str, Path], tmp_path: Path) -> None:
    address, root = ftp
    async with serve(make_app(delay=0)) as base:
        code, stderr = await crawl(tmp_path, f"ftp://eclaw:s3cret@{address}/out/{{spider}}.jsonl", base)
    assert code == 0, stderr[-2000:]
    pages = [int(json.loads(line)["page"]) for line in (root / "out" / "state-site.jsonl").read_text().splitlines()]
    assert sorted(pages) == sorted(expected()[0])
    assert "s3cret" not in stderr


@pytest.mark.parametrize(
    ("path", "password", "said"),
    [("/out/x.jsonl", "wrong", "530"), ("/nosuch/x.jsonl", "s3cret", "550")],
)  # fmt: skip
async def test_bad_password_or_directory_is_one_line_and_exit_2(
    ftp: tuple[str, Path], tmp_path: Path, path: str, password: str, said: str
) -> None:
    address, _ = ftp
    code, stderr = await crawl(tmp_path, f"ftp://eclaw:{password}@{address}{path}")
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and f"output ftp://eclaw:***@{address}{path}: {said}" in lines[0], lines
    assert password not in stderr


async def test_ftps_delivers_over_tls_trusting_a_private_ca(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """``-o ftps://…``: the certificate is verified (a private CA trusted with SSL_CERT_FILE); the server
    requires TLS on control and data, and saw the file arrive over TLS."""
    from tests.outputs.servers import ftps_server
    from tests.proxies import self_signed

    certs = tmp_path_factory.mktemp("ftps-cert")
    self_signed(certs)
    root = tmp_path_factory.mktemp("ftps")
    (root / "out").mkdir()

    async def run(address: str, env: dict[str, str]) -> tuple[int, str]:
        async with serve(make_app(delay=0)) as base:
            return await crawl(tmp_path, f"ftps://eclaw:s3cret@{address}/out/{{spider}}.jsonl", base, env)

    with ftps_server(str(root), str(certs / "cert.pem"), str(certs / "key.pem")) as (address, received):
        code, stderr = await run(address, ENV)
        assert code == 2 and "CERTIFICATE_VERIFY_FAILED" in stderr, stderr
        code, stderr = await run(address, {**ENV, "SSL_CERT_FILE": str(certs / "cert.pem")})
    assert code == 0, stderr[-2000:]
    pages = [int(json.loads(line)["page"]) for line in (root / "out" / "state-site.jsonl").read_text().splitlines()]
    assert sorted(pages) == sorted(expected()[0])
    assert [Path(f).name for f in received] == ["state-site.jsonl"]
