"""The impersonate fetcher (curl_cffi) against a real nginx speaking HTTP/2 over TLS.

What a user relies on: a site crawls completely over HTTP/2 with a browser's headers; one
host can be impersonated and another fetched plainly in the same crawl, or moved while the
crawl runs; and redirects, offsite hops, size limits, timeouts, TLS checks, cookies and
proxies behave as with the plain fetcher.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from eclaw import ConfigError, Engine, IgnoreRequest, Request, Response, Settings, Spider
from eclaw.events import RequestFailed
from eclaw.exceptions import (
    ConnectError,
    DownloadTimeout,
    ProxyError,
    RedirectLoop,
    ResponseTooLarge,
    TLSCertificateError,
    TLSError,
    TooManyRedirects,
    UnsupportedRedirect,
)
from eclaw.fetchers.impersonate import ImpersonateFetcher
from eclaw.fetchers.router import Fetchers, host_fetchers
from eclaw.http.urls import url_host
from eclaw.media import FilesPipeline
from eclaw.middlewares import BROWSERS
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted
from tests.nginx import TERMS, Nginx, nginx
from tests.proxies import tinyproxy
from tests.sites import fault_app

SELF_SIGNED = "tls: certificate verify failed: self-signed certificate"
STOCK_UA = BROWSERS[0][0]  # what the UserAgent middleware adds by default
MB = 1024 * 1024


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    with nginx(tmp_path_factory.mktemp("nginx")) as running:
        yield running


class Glossary(Spider):
    name = "glossary"
    allowed_domains = ["127.0.0.1", "127.0.0.2"]

    def parse(self, response: Response) -> Iterator[Any]:
        term = response.css("h1.term::text").get()
        if term:
            yield {
                "term": term,
                "definition": response.css("p.definition::text").get(),
                "host": url_host(response.url),
                "http_version": response.meta.get("http_version"),
                "hops": len(response.meta.get("redirect_urls", ())),
            }
        elif response.css("dl"):
            yield {"entries": len(response.css("dt")), "http_version": response.meta.get("http_version")}
        yield from response.follow_all(css="a")


def served(site: Nginx, start: int, count: int) -> list[dict[str, str]]:
    """The ``count`` requests nginx logged since line ``start`` (waiting for them a little: nginx logs a
    request just after its last byte), less the downloads other tests cut short (logged when nginx notices)."""
    deadline = time.monotonic() + 5
    while True:
        lines = [line for line in site.log()[start:] if line["uri"] not in ("/slow.html", "/bomb.html", "/archive.bin")]
        if len(lines) >= count or time.monotonic() > deadline:
            assert len(lines) == count, lines
            return lines
        time.sleep(0.01)


def expected_terms() -> list[str]:
    return sorted(term for _, term, _, _ in TERMS.values())


def browser_version(user_agent: str) -> str:
    found = re.search(r"Chrome/(\d+)", user_agent)
    assert found, user_agent
    return found.group(1)


async def test_the_glossary_crawls_completely_over_http2_with_the_browsers_own_headers(site: Nginx) -> None:
    class Impersonated(Glossary):
        fetcher = "impersonate"

    start = len(site.log())
    items, stats = await collect(
        Impersonated, settings=Settings(verify_tls=False, store=""), start_urls=[site.base + "/"]
    )
    terms = [item for item in items if "term" in item]
    assert sorted(item["term"] for item in terms if item["host"] == "127.0.0.1") == expected_terms()
    by_term = {item["term"]: item for item in terms}
    for _, term, definition, _ in TERMS.values():  # UTF-8 and ISO-8859-15 pages decoded right
        assert by_term[term]["definition"] == definition
    assert by_term["destination"]["hops"] == 2  # /old -> /older -> /terms/end.html
    assert [item["host"] for item in terms if item["host"] != "127.0.0.1"] == ["127.0.0.2"]
    assert [item["entries"] for item in items if "entries" in item] == [2000]  # the gzip'd page, whole
    assert {item["http_version"] for item in items} == {"HTTP/2"}
    assert stats.failed_by_reason == {"http 404": 1}
    assert_accounted(stats)
    lines = served(site, start, 13)  # the index, 7 pages, 2 hops, the 404, the glossary, .2's page
    assert {line["protocol"] for line in lines} == {"HTTP/2.0"}  # nginx saw HTTP/2 only
    assert {line["encoding"] for line in lines if line["uri"] == "/glossary.html"} == {"gzip"}
    for line in lines:  # one browser: the UA the TLS fingerprint and sec-ch-ua claim, not the stock one
        assert line["user_agent"] != STOCK_UA
        assert f'"Google Chrome";v="{browser_version(line["user_agent"])}"' in line["sec_ch_ua"]


async def test_one_host_impersonated_and_another_plain_in_one_crawl(site: Nginx) -> None:
    settings = Settings(verify_tls=False, store="", fetchers="127.0.0.2=impersonate")
    start = len(site.log())
    items, stats = await collect(Glossary, settings=settings, start_urls=[site.base + "/"])
    versions = {(item["host"], item["http_version"]) for item in items if "term" in item}
    assert versions == {("127.0.0.1", None), ("127.0.0.2", "HTTP/2")}
    assert stats.failed_by_reason == {"http 404": 1}
    assert_accounted(stats)
    lines = served(site, start, 13)
    assert {(line["host"], line["protocol"]) for line in lines} == {  # one host over HTTP/1.1, the other HTTP/2
        ("127.0.0.1", "HTTP/1.1"),
        ("127.0.0.2", "HTTP/2.0"),
    }
    assert {line["user_agent"] for line in lines if line["host"] == "127.0.0.1"} == {STOCK_UA}
    assert all(bool(line["sec_ch_ua"]) == (line["host"] == "127.0.0.2") for line in lines)  # a browser's header


async def test_a_host_moved_to_the_impersonate_fetcher_while_the_crawl_runs(site: Nginx) -> None:
    router = Fetchers()

    class Escalating(Spider):
        name = "escalating"
        handle_httpstatus_list = [505]

        def parse(self, response: Response) -> Iterator[Any]:
            if response.status == 505 and not response.meta.get("escalated"):  # the server wants HTTP/2
                router.use(url_host(response.url), "impersonate")
                yield response.request.replace(dont_filter=True, meta={"escalated": True})
            else:
                yield {"status": response.status, "http_version": response.meta.get("http_version")}

    start = len(site.log())
    engine = Engine(Settings(verify_tls=False, store=""), fetcher=lambda: router)
    items, stats = await collect(Escalating, engine=engine, start_urls=[site.h2_only + "/welcome.html"])
    assert items == [{"status": 200, "http_version": "HTTP/2"}]
    assert [(line["protocol"], line["status"]) for line in served(site, start, 2)] == [
        ("HTTP/1.1", "505"),  # what an HTTP/1.1 client (the plain fetcher) gets from it
        ("HTTP/2.0", "200"),
    ]
    assert_accounted(stats)


@pytest.fixture
async def fetch(site: Nginx) -> AsyncIterator[Any]:
    """Fetch a path of the site with an impersonate fetcher opened with the given settings."""
    opened: list[ImpersonateFetcher] = []

    async def get(
        path: str, spider: Spider | None = None, headers: dict[str, str] | None = None, proxy: str = "", **settings: Any
    ) -> Response:
        fetcher = ImpersonateFetcher()
        values = {"verify_tls": False, "max_redirects": 5, "max_response_size": MB, **settings}
        await fetcher.open(spider or Glossary(), Settings(**values))
        opened.append(fetcher)
        url = path if "://" in path else site.base + path
        return await fetcher.fetch(Request(url, headers=headers, meta={"proxy": proxy} if proxy else None))

    yield get
    for fetcher in opened:
        await fetcher.close()


async def test_redirects_are_followed_by_eclaw_hop_by_hop(fetch: Any) -> None:
    response = await fetch("/hop/3")
    assert response.status == 200 and response.url.endswith("/terms/end.html")
    assert [url.rsplit("/", 2)[-2:] for url in response.meta["redirect_urls"]] == [
        ["hop", "3"],
        ["hop", "2"],
        ["hop", "1"],
    ]
    with pytest.raises(TooManyRedirects):
        await fetch("/hop/3", max_redirects=2)
    with pytest.raises(RedirectLoop):
        await fetch("/loop/a")
    with pytest.raises(IgnoreRequest, match="offsite redirect"):
        await fetch("/away")
    with pytest.raises(UnsupportedRedirect):
        await fetch("/mail")


async def test_bodies_over_max_response_size_are_refused_as_they_arrive(fetch: Any, site: Nginx) -> None:
    with pytest.raises(ResponseTooLarge, match=f"Content-Length {2 * MB} > max_response_size {MB}"):
        await fetch("/archive.bin")
    started = time.monotonic()
    with pytest.raises(ResponseTooLarge, match=f"body over max_response_size {MB}"):
        await fetch("/bomb.html")  # 8 MB once unzipped, ~10 KB on the wire
    assert time.monotonic() - started < 10  # refused as it arrives (slack for a loaded machine)
    assert site.logged("/bomb.html")["encoding"] == "gzip"
    assert len((await fetch("/bomb.html", max_response_size=9 * MB)).body) == 8 * MB + 7


class Chunks:
    """A body sink keeping what it was given, chunk by chunk."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.begun = 0

    async def begin(self) -> None:
        self.begun += 1
        self.chunks.clear()

    async def write(self, data: bytes) -> None:
        self.chunks.append(data)


async def test_a_request_streams_its_body_to_a_sink_under_its_own_bound(site: Nginx) -> None:
    fetcher = ImpersonateFetcher()
    await fetcher.open(Glossary(), Settings(verify_tls=False, max_response_size=MB))
    try:
        sink = Chunks()
        meta = {"stream_to": sink, "max_response_size": 3 * MB}  # over the setting's bound: the request's own
        response = await fetcher.fetch(Request(site.base + "/archive.bin", meta=meta))
        assert response.status == 200 and response.body == b"" and sink.begun == 1
        assert b"".join(sink.chunks) == (site.workdir / "site" / "archive.bin").read_bytes() and len(sink.chunks) > 8
        with pytest.raises(ResponseTooLarge, match=f"body over max_response_size {MB}"):  # a bomb, streamed
            await fetcher.fetch(Request(site.base + "/bomb.html", meta={"stream_to": Chunks()}))
        missing = Chunks()
        response = await fetcher.fetch(Request(site.base + "/nowhere", meta={"stream_to": missing}))
        assert response.status == 404 and response.body and missing.begun == 0  # not 2xx: read as a page
        started = time.monotonic()
        with pytest.raises(DownloadTimeout, match="timeout fetching"):  # 40 KB at 1 KB/s: the whole is timed
            await fetcher.fetch(Request(site.base + "/slow.html", meta={"stream_to": Chunks(),
                                                                             "download_timeout": 0.5}))  # fmt: skip
        assert time.monotonic() - started < 10  # not the 40 s of the whole page (slack for a loaded machine)
        start = len(site.log())  # the cookie a streamed response sets goes with the pages: one jar a crawl
        await fetcher.fetch(Request(site.base + "/welcome.html", meta={"stream_to": Chunks()}))
        await fetcher.fetch(Request(site.base + "/terms/cafe.html"))
        assert [line["cookie"] for line in served(site, start, 2)] == ["", "fr"]
    finally:
        await fetcher.close()


RSS_CHILD = """
import asyncio, hashlib, json, sys
from eclaw import Request, Settings, Spider
from eclaw.fetchers.impersonate import ImpersonateFetcher

class Digest:
    async def begin(self):
        self.sha, self.size = hashlib.sha256(), 0
    async def write(self, data):
        self.sha.update(data)
        self.size += len(data)

def peak_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

async def main(base):
    fetcher = ImpersonateFetcher()
    await fetcher.open(Spider(name="rss"), Settings(max_response_size=1024 * 1024))
    small = Digest()
    await fetcher.fetch(Request(base + "/small", meta={"stream_to": small}))
    before, big = peak_kb(), Digest()
    await fetcher.fetch(Request(base + "/big", meta={"stream_to": big, "max_response_size": 2**30}))
    await fetcher.close()
    print(json.dumps({"before": before, "after": peak_kb(), "size": big.size, "sha": big.sha.hexdigest()}))

asyncio.run(main(sys.argv[1]))
"""


async def test_a_200_mb_body_streams_at_flat_rss() -> None:
    from aiohttp import web

    chunk, count = bytes(range(256)) * 4096, 200  # 1 MB, 200 times

    async def big(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = len(chunk) * count
        await response.prepare(request)
        for _ in range(count):
            await response.write(chunk)
        return response

    async def small(request: web.Request) -> web.Response:
        return web.Response(body=chunk, content_type="application/octet-stream")

    app = web.Application()
    app.router.add_get("/big", big)
    app.router.add_get("/small", small)
    async with serve(app) as base:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", RSS_CHILD, base, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(child.communicate(), timeout=120)
    assert child.returncode == 0, err.decode()[-2000:]
    report = json.loads(out)
    assert report["size"] == len(chunk) * count and report["sha"] == hashlib.sha256(chunk * count).hexdigest()
    assert report["after"] - report["before"] < 40 * 1024, report  # kB: the 200 MB never in memory


async def test_the_files_pipeline_streams_through_the_impersonate_fetcher(site: Nginx, tmp_path: Path) -> None:
    class Files(Spider):
        name = "files"
        fetcher = "impersonate"
        pipelines = [FilesPipeline]

        def parse(self, response: Response) -> Iterator[Any]:
            yield {"file_urls": [response.urljoin("/archive.bin")]}

    settings = Settings(verify_tls=False, store="", files_store=str(tmp_path), max_response_size=MB)
    [item], _ = await collect(Files, settings=settings, start_urls=[site.base + "/"])
    [stored] = item["files"]  # 2 MB: over max_response_size, under files_max_size
    assert stored["status"] == "downloaded" and stored["size"] == 2 * MB
    assert (tmp_path / stored["path"]).read_bytes() == (site.workdir / "site" / "archive.bin").read_bytes()


async def test_timeouts(fetch: Any) -> None:
    started = time.monotonic()
    with pytest.raises(DownloadTimeout, match="timeout fetching"):
        await fetch("/slow.html", timeout=0.5)  # nginx sends its 40 KB at 1 KB/s
    assert time.monotonic() - started < 10  # not the 40 s of the whole page (slack for a loaded machine)
    async with serve(fault_app()) as base:
        started = time.monotonic()
        with pytest.raises(DownloadTimeout):
            await fetch(base + "/sleepy?s=8", read_timeout=0.5)  # silent for 8 s: read_timeout, in whole seconds
        assert time.monotonic() - started < 5  # not the 8 s of silence (slack for a loaded machine)
    with pytest.raises(ConnectError, match="cannot connect"):
        await fetch("http://127.0.0.1:9/", connect_timeout=2)  # the discard port: nothing listens


async def test_tls_failures_are_named_as_the_plain_fetcher_names_them(
    fetch: Any, site: Nginx, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(TLSCertificateError) as failed:
        await fetch("/", verify_tls=True)
    assert failed.value.reason == SELF_SIGNED
    assert "(to crawl it anyway, turn the check off with -s verify_tls=false)" in str(failed.value)
    monkeypatch.setenv("SSL_CERT_FILE", str(site.workdir / "cert.pem"))  # trust the site's certificate
    assert (await fetch("/", verify_tls=True)).meta["http_version"] == "HTTP/2"
    with pytest.raises(TLSCertificateError) as failed:
        await fetch(site.stranger + "/", verify_tls=True)  # a certificate for 127.0.0.1 and .2 only
    assert failed.value.reason == "tls: certificate verify failed: IP address mismatch"
    async with serve(fault_app()) as base:  # https:// to a plain HTTP port: no TLS record comes back
        with pytest.raises(TLSError) as failed:
            await fetch(base.replace("http://", "https://") + "/status/200")
    assert failed.value.reason == "tls: wrong version number"


async def test_a_crawl_fails_a_self_signed_site_once_without_retrying(site: Nginx) -> None:
    causes: list[str] = []

    class Checked(Glossary):
        def start_requests(self) -> Iterator[Request]:
            yield Request(site.base + "/", errback=self.failed)

        def failed(self, event: RequestFailed) -> None:
            causes.append(type(event.error.__cause__).__module__)  # what the fetcher translated

    settings = Settings(store="", fetchers="127.0.0.1=impersonate")
    items, stats = await collect(Checked, settings=settings)
    assert items == [] and stats.failed_by_reason == {SELF_SIGNED: 1} and stats.retries == 0
    assert causes == ["curl_cffi.requests.exceptions"]  # curl's error, named as the plain fetcher names it
    assert_accounted(stats)


async def test_cookies_are_kept_per_crawl_unless_turned_off(fetch: Any, site: Nginx) -> None:
    class Visitor(Glossary):
        fetcher = "impersonate"
        start_urls = [site.base + "/welcome.html"]

        def parse(self, response: Response) -> Iterator[Any]:
            yield Request(site.base + "/terms/cafe.html", callback=self.done)

        def done(self, response: Response) -> Iterator[Any]:
            yield {"term": response.css("h1::text").get()}

    for cookies, sent in ((True, "fr"), (False, "")):
        start = len(site.log())
        items, _ = await collect(Visitor, settings=Settings(verify_tls=False, store="", cookies=cookies))
        assert items == [{"term": "café"}]
        assert [line["cookie"] for line in served(site, start, 2)] == ["", sent]


async def test_a_user_agent_of_the_requests_or_spiders_own_is_sent_as_is(fetch: Any, site: Nginx) -> None:
    class Named(Glossary):
        user_agent = "glossary-bot/2.0"  # named by the spider: sent, whatever the fingerprint says

    await fetch("/?ua=own", headers={"User-Agent": "glossary-bot/1.0"})
    await fetch("/?ua=stock", headers={"User-Agent": STOCK_UA, "Accept": BROWSERS[0][1], "Accept-Language": "fr"})
    await fetch("/?ua=named", spider=Named(), headers={"User-Agent": STOCK_UA})
    own, stock, named = (site.logged(f"/?ua={case}") for case in ("own", "stock", "named"))
    assert own["user_agent"] == "glossary-bot/1.0"
    assert stock["user_agent"] != STOCK_UA and "Chrome/" in stock["user_agent"]  # the impersonated browser's
    assert named["user_agent"] == STOCK_UA  # the spider names a UA: the request's is kept as it is


async def test_proxies_with_credentials_tunnel_https_and_http2_goes_through(fetch: Any, tmp_path: Path) -> None:
    async with tinyproxy(tmp_path, auth=("alice", "s3cret")) as (address, log):
        response = await fetch("/terms/cafe.html", proxy=f"http://alice:s3cret@{address}")
        assert response.status == 200 and response.meta["http_version"] == "HTTP/2"
        assert "CONNECT 127.0.0.1:" in log.read_text()
        with pytest.raises(ProxyError, match=f"proxy http://alice:\\*\\*\\*@{address} failed") as failed:
            await fetch("/terms/cafe.html", proxy=f"http://alice:wrong@{address}")
    assert "wrong" not in str(failed.value)


async def test_a_missing_extra_or_a_bad_option_is_a_one_line_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="did you mean 'chrome146'"):
        await ImpersonateFetcher().open(Glossary(), Settings(impersonate="chrome-146"))
    monkeypatch.setitem(sys.modules, "curl_cffi", None)  # as if the extra were not installed
    with pytest.raises(ConfigError) as failed:
        await collect(Glossary, settings=Settings(store="", fetchers="glossary.test=impersonate"))
    assert str(failed.value) == "the impersonate fetcher needs curl_cffi: pip install 'eclaw[impersonate]'"


def test_eclaw_imports_without_curl_cffi() -> None:
    code = "import sys; sys.modules['curl_cffi'] = None; import eclaw, eclaw.fetchers.router; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout == "ok\n", done.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("example.com", "'example.com' is not host=fetcher"),
        ("=plain", "'=plain' is not host=fetcher"),
        ("https://example.com=plain", "'https://example.com' must be a host name, not a URL or host:port"),
        ("example.com:8443=plain", "'example.com:8443' must be a host name, not a URL or host:port"),
        ("a.test=plain, a.test=impersonate", "a.test is given two fetchers (plain, impersonate)"),
    ],
)
def test_the_fetchers_setting_is_checked(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as failed:
        host_fetchers(text)
    assert str(failed.value) == f"setting 'fetchers': {message}"


def test_the_fetchers_setting_is_parsed() -> None:
    assert host_fetchers(" A.test=impersonate, b.test=plain ,, [::1]=plain") == {
        "a.test": "impersonate",
        "b.test": "plain",
        "::1": "plain",
    }


async def test_an_unknown_fetcher_for_a_host_stops_the_crawl_before_it_starts() -> None:
    with pytest.raises(ConfigError, match=r"setting 'fetchers': no fetcher 'telepathy' for a.test \(known: "):
        await collect(Glossary, settings=Settings(store="", fetchers="a.test=telepathy"))
