"""Guards of docs/browser.md: a certificate the browser refuses fails the page at once as a certificate
failure (its own reason, no retry), as with the plain fetcher, never as a connect error tried again; so
does a TLS handshake that cannot succeed (``tls: ...``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eclaw import Request, Response, Settings, Spider
from eclaw.testing import collect
from tests.conftest import assert_accounted, read_jsonl
from tests.proxies import self_signed
from tests.test_tls import site

pytestmark = pytest.mark.usefixtures("chromium")


class Rendered(Spider):
    name = "rendered"

    def __init__(self, url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = url

    async def start_requests(self) -> Any:
        yield Request(self.url, render=True)

    def parse(self, response: Response) -> Any:
        yield {"url": response.url}


async def test_a_certificate_the_browser_refuses_fails_at_once_as_a_certificate_failure(tmp_path: Path) -> None:
    failures = tmp_path / "failures.jsonl"
    async with site(self_signed(tmp_path)) as (base, hits):
        items, stats = await collect(Rendered, settings=Settings(failures=str(failures)), url=base + "/")
    assert_accounted(stats)
    assert items == [] and hits["/"] == 0  # the page was never served
    ((reason, count),) = stats.failed_by_reason.items()
    assert reason.startswith("tls: certificate verify failed: ") and count == 1, reason
    assert stats.retries == 0  # the default Retry is on: a certificate failure is not tried again
    (record,) = read_jsonl(failures)
    assert record["attempts"] == 1 and record["error"].startswith("TLSCertificateError: "), record


async def test_a_handshake_the_browser_cannot_make_fails_at_once_as_a_tls_failure() -> None:
    async with site(None) as (base, hits):  # https:// to a plain HTTP port: no TLS record comes back
        items, stats = await collect(Rendered, url=base.replace("http://", "https://") + "/")
    assert_accounted(stats)
    ((reason, count),) = stats.failed_by_reason.items()
    assert reason.startswith("tls: ") and "certificate" not in reason and count == 1, reason
    assert items == [] and stats.retries == 0 and hits["/"] == 0
