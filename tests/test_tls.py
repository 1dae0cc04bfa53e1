"""TLS failures against local servers: a certificate that does not verify, or a handshake that
cannot succeed, fails at once with its own reason (never retried as a connect error)."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import Response, Settings, Spider
from eclaw.testing import collect
from tests.conftest import assert_accounted, read_jsonl, record_file
from tests.proxies import self_signed
from tests.test_cli import eclaw

ROOT = Path(__file__).resolve().parents[1]

SELF_SIGNED = "tls: certificate verify failed: self-signed certificate"
HINT = "(to crawl it anyway, turn the check off with -s verify_tls=false)"


class Pages(Spider):
    name = "pages"
    allowed_domains = ["127.0.0.1"]

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url}
        yield from response.follow_all(css="a")


@asynccontextmanager
async def site(tls: ssl.SSLContext | None, host: str = "127.0.0.1") -> AsyncIterator[tuple[str, Counter[str]]]:
    """Three linked pages on ``host`` and 127.0.0.1 (over TLS if ``tls``); yields the base URL (with
    ``host``) and the counts of ``connections`` accepted and of hits per path (a failed handshake
    is a connection, no hit)."""
    hits: Counter[str] = Counter()

    async def page(request: web.Request) -> web.Response:
        hits[request.path] += 1
        return web.Response(text='<title>t</title><a href="/a">a</a><a href="/b">b</a>', content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner = web.AppRunner(app)
    await runner.setup()
    assert runner.server is not None
    handler = runner.server

    def accepted() -> web.RequestHandler[web.Request]:
        hits["connections"] += 1
        return handler()

    loop = asyncio.get_running_loop()
    servers = [await loop.create_server(accepted, "127.0.0.1", 0, ssl=tls)]
    port = servers[0].sockets[0].getsockname()[1]
    if host != "127.0.0.1":
        servers.append(await loop.create_server(accepted, host, port, ssl=tls))
    try:
        yield f"{'https' if tls else 'http'}://{host}:{port}", hits
    finally:
        for server in servers:
            server.close()
        await runner.cleanup()


async def test_a_self_signed_certificate_fails_at_once_and_verify_tls_false_crawls_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="eclaw")
    failures = tmp_path / "failures.jsonl"
    async with site(self_signed(tmp_path)) as (base, hits):
        items, stats = await collect(Pages, settings=Settings(failures=str(failures)), start_urls=[base + "/"])
        assert hits == {"connections": 1}  # one attempt (the default Retry is on), no page served
        assert items == [] and stats.failed_by_reason == {SELF_SIGNED: 1} and stats.retries == 0
        assert_accounted(stats)
        (record,) = read_jsonl(failures)
        assert record["reason"] == SELF_SIGNED and record["attempts"] == 1
        assert "retrying" not in caplog.text and "gave up" not in caplog.text
        (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("failed")]
        assert line == f"failed {base}/: TLS certificate of {base}/ does not verify: self-signed certificate {HINT}"
        assert record["error"] == "TLSCertificateError: " + line.partition(": ")[2]
        items, stats = await collect(Pages, settings=Settings(verify_tls=False), start_urls=[base + "/"])
    assert sorted(item["url"] for item in items) == [base + "/", base + "/a", base + "/b"]
    assert stats.requests_failed == 0 and hits["/"] == hits["/a"] == hits["/b"] == 1
    assert_accounted(stats)


async def test_a_handshake_that_cannot_succeed_is_not_retried(tmp_path: Path) -> None:
    async with site(None) as (base, hits):  # https:// to a plain HTTP port: the answer is no TLS record
        items, stats = await collect(Pages, start_urls=[base.replace("http://", "https://") + "/"])
    ((reason, count),) = stats.failed_by_reason.items()
    assert reason.startswith("tls: ") and "certificate" not in reason and count == 1  # e.g. "tls: wrong version number"
    assert items == [] and hits["connections"] == 1 and stats.retries == 0
    assert_accounted(stats)


async def fresh_eclaw(*args: str) -> tuple[int, str]:
    """``python -m eclaw ARGS`` in a fresh Python (the test's environment, SSL_CERT_FILE included: aiohttp
    makes its default TLS context as it is imported, so a command in this process, or forked from a warm
    one, would not see a certificate file set by the test); its exit code and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eclaw", *args, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, err.decode()


SPIDER = """
from eclaw import Spider


class Secure(Spider):
    name = "secure"
    start_urls = {urls!r}

    def parse(self, response):
        yield {{"url": response.url}}
"""


async def test_cli_names_the_certificate_failure_in_one_line(tmp_path: Path) -> None:
    failures = tmp_path / "failures.jsonl"
    async with site(self_signed(tmp_path)) as (base, hits):
        (tmp_path / "secure.py").write_text(SPIDER.format(urls=[base + "/"]))
        code, out, err = await eclaw("crawl", str(tmp_path / "secure.py"), "-s", f"failures={failures}")
    assert code == 0, err
    assert hits == {"connections": 1}
    assert SELF_SIGNED in out  # the stats table, under its reason
    (line,) = [line for line in err.splitlines() if "does not verify" in line]
    assert line.endswith(f"failed {base}/: TLS certificate of {base}/ does not verify: self-signed certificate {HINT}")
    assert "Traceback" not in err and "retrying" not in err and "_ssl.c" not in err
    (record,) = read_jsonl(failures)
    assert record["reason"] == SELF_SIGNED


async def test_a_trusted_certificate_verifies_and_names_no_host_in_the_reason_when_it_is_anothers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))  # the crawl trusts the site's certificate
    async with site(self_signed(tmp_path), host="127.0.0.2") as (other, hits):  # ... made for 127.0.0.1 only
        base = other.replace("127.0.0.2", "127.0.0.1")
        (tmp_path / "secure.py").write_text(SPIDER.format(urls=[base + "/", other + "/"]))
        code, err = await fresh_eclaw("crawl", str(tmp_path / "secure.py"), "-o", str(tmp_path / "items.jsonl"))
    assert code == 0, err
    assert read_jsonl(tmp_path / "items.jsonl") == [{"url": base + "/"}] and hits["/"] == 1
    (record,) = read_jsonl(record_file("secure", "failures"))
    assert record["url"] == other + "/" and record["attempts"] == 1
    assert record["reason"] == "tls: certificate verify failed: IP address mismatch"  # one reason, whatever the host
    assert "certificate is not valid for '127.0.0.2'" in record["error"] and HINT in record["error"]
