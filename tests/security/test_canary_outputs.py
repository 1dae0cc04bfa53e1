"""The canary over the data-out writers: one crawl with planted secrets writes every new kind of
output at once, then every byte they produced is searched for the secrets (decoded first).

Planted: a bearer token (``Authorization``) and a cookie (``Cookie`` and ``meta["cookies"]``) on the
requests, one of them redirected (the hop is archived too); a password in the crawled URLs; a token in
a query string (a secret spider argument); a proxy password (a real tinyproxy with basic auth); the
passwords of the ``ftp://`` and ``postgresql://`` output URIs; the AWS secret key in the environment.

Written, and searched: ``.jsonl.gz``, ``.jsonl.zst``, ``.csv.bz2``, ``.json.xz`` (decompressed, every
member), the WARC archive and its CDXJ index, the markdown folder and ``.md.jsonl``, the state
folder, the log file (JSON, DEBUG), the trace and its HTML report, the console; the S3 object (moto)
and the S3 spool (the spool of a run killed mid-crawl, and the state it left), the file the FTP
server received (pyftpdlib), the PostgreSQL table (every row). Page bodies are not planted with
secrets: eclaw has no setting that redacts a body (an archive keeps the bytes the site sent).
"""

from __future__ import annotations

import asyncio
import base64
import bz2
import gzip
import json
import lzma
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import warnings
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio
from aiohttp import web

from eclaw.testing import serve
from tests.inprocess import eclaw_inprocess
from tests.outputs.postgres_server import PostgresServer, postgres_server
from tests.outputs.servers import moto_server, s3_client
from tests.proxies import tinyproxy

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).parents[2]
TOKEN = "CANARY1tokenX"  # Authorization: Bearer
URL_PASSWORD = "CANARY2urlpw"  # http://user:PASSWORD@host/
PROXY_PASSWORD = "CANARY3proxypw"  # proxies=http://u:PASSWORD@127.0.0.1:port
COOKIE = "CANARY5cookie"  # Cookie: sid= and meta["cookies"]
QUERY_TOKEN = "CANARY6querytok"  # -a api_token=: sent as ?token= in a URL
FTP_PASSWORD = "CANARY7ftppw"  # -o ftp://eclaw:PASSWORD@host/items.jsonl
PG_PASSWORD = "CANARY8pgpw"  # -o postgresql://eclaw:PASSWORD@host/db?table=items
AWS_SECRET = "CANARY9awssecret"  # AWS_SECRET_ACCESS_KEY
CANARIES = {
    "bearer token": [TOKEN],
    "URL password": [URL_PASSWORD, base64.b64encode(f"user:{URL_PASSWORD}".encode()).decode()],
    "proxy password": [PROXY_PASSWORD, base64.b64encode(f"u:{PROXY_PASSWORD}".encode()).decode()],
    "cookie": [COOKIE],
    "query-string token": [QUERY_TOKEN],
    "ftp:// password": [FTP_PASSWORD],
    "postgresql:// password": [PG_PASSWORD],
    "AWS secret key": [AWS_SECRET],
}

SPIDER = textwrap.dedent(
    f'''
    from eclaw import Request, Spider

    HEADERS = {{"Authorization": "Bearer {TOKEN}", "Cookie": "sid={COOKIE}"}}


    class Canary(Spider):
        name = "canary"
        base_url = ""
        api_token = ""
        custom_settings = {{"concurrency": 2}}

        def secret(self, path):
            """A request with planted secrets: cookies, and a bearer token, a password in its URL
            (aiohttp takes one of the two only) or a token in its query string."""
            if path in ("/", "/a"):
                base = self.base_url.replace("http://", "http://user:{URL_PASSWORD}@")
                return Request(base + path, headers={{"Cookie": "sid={COOKIE}"}}, cookies={{"jar": "{COOKIE}"}})
            if path == "/search":
                path = f"/search?q=shoes&token={{self.api_token}}"
            return Request(self.base_url + path, headers=HEADERS, cookies={{"jar": "{COOKIE}"}})

        async def start_requests(self):
            self.logger.debug("logging in with token %s", self.api_token)
            yield self.secret("/")

        def parse(self, response):
            self.logger.debug("got %s for %r", response.url, dict(response.request.headers))
            for href in response.css("a::attr(href)").getall():
                yield self.secret(href)
            page = response.url.split("?")[0].replace("user:{URL_PASSWORD}@", "")
            yield {{"page": page, "title": response.css("h1::text").get()}}
    '''
)
PAGES = ["/a", "/b", "/search", "/moved", "/fail"] + [f"/more/{n}" for n in range(30)]


def site(gate: asyncio.Event | None = None) -> web.Application:
    """``/`` links to pages of prose (main content for the markdown outputs), a search page, a
    redirect to ``/landing`` and a 500; ``/more/N`` pages, held until ``gate`` is set (the killed run
    checkpoints what came before them, and cannot end before it is killed)."""

    async def page(request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/moved":
            raise web.HTTPFound("/landing")
        if path == "/fail":
            return web.Response(status=500, text="down")
        if path.startswith("/more/") and gate is not None:
            await gate.wait()
        links = "".join(f'<li><a href="{href}">{href}</a></li>' for href in (PAGES if path == "/" else []))
        prose = "".join(f"<p>Paragraph {n} of the page {path}: words about shoes and laces.</p>" for n in range(6))
        body = f"<html><head><title>{path}</title></head><body><article><h1>{path}</h1>{prose}</article>"
        return web.Response(text=f"{body}<nav><ul>{links}</ul></nav></body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    return app


# -- reading every byte -----------------------------------------------------------------------


def forms(secret: str) -> set[str]:
    """How a secret may be written: as is, percent-encoded, JSON-escaped."""
    return {secret, quote(secret, safe=""), json.dumps(secret)[1:-1]}


def decoded(data: bytes) -> Iterator[bytes]:
    """``data``, and what it decodes to when compressed: every member (or frame, or stream), the
    last one's readable part when a killed run left it unfinished."""
    yield data
    import zstandard

    makers: dict[bytes, Callable[[], Any]] = {
        b"\x1f\x8b": lambda: zlib.decompressobj(31),
        b"\x28\xb5\x2f\xfd": lambda: zstandard.ZstdDecompressor().decompressobj(),
        b"BZh": bz2.BZ2Decompressor, b"\xfd7zXZ\x00": lzma.LZMADecompressor,
    }  # fmt: skip
    make = next((maker for magic, maker in makers.items() if data.startswith(magic)), None)
    out, rest = [], data
    while make is not None and rest:
        decoder = make()
        try:
            out.append(decoder.decompress(rest))
        except (zlib.error, zstandard.ZstdError, OSError, lzma.LZMAError, EOFError):
            break
        if not decoder.eof:
            break
        rest = decoder.unused_data
    if out:
        yield b"".join(out)


def texts(path: Path) -> Iterator[str]:
    """What a file holds, as text: its bytes, decompressed, each SQLite value of a database."""
    data = path.read_bytes()
    for form in decoded(data):
        yield form.decode("latin-1")
    if data[:16] == b"SQLite format 3\x00" and not path.name.endswith(("-wal", "-shm")):
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            yield "\n".join(db.iterdump())


def files(root: Path) -> list[tuple[str, str]]:
    """(where, text) of every file under ``root``, and every name (a page's file is named by its URL)."""
    paths = sorted(root.rglob("*"))
    names = [("the file names", "\n".join(str(p.relative_to(root)) for p in paths))]
    return names + [(str(p.relative_to(root.parent)), t) for p in paths if p.is_file() for t in texts(p)]


def leaks(sources: Iterable[tuple[str, str]]) -> list[str]:
    """Every planted secret found in ``sources`` ((where, text) pairs)."""
    found = []
    for where, content in sources:
        for what, secrets in CANARIES.items():
            if any(form in content for secret in secrets for form in forms(secret)):
                found.append(f"{what} in {where}")
    return sorted(set(found))


# -- the servers ------------------------------------------------------------------------------


@contextmanager
def ftp_server(root: Path) -> Iterator[str]:
    """pyftpdlib on 127.0.0.1 serving ``root`` to user ``eclaw`` with the canary password: ``host:port``."""
    with warnings.catch_warnings():  # pyftpdlib still imports asyncore (deprecated) on Python 3.11
        warnings.simplefilter("ignore", DeprecationWarning)
        from pyftpdlib.authorizers import DummyAuthorizer
        from pyftpdlib.handlers import FTPHandler
        from pyftpdlib.ioloop import IOLoop
        from pyftpdlib.servers import FTPServer

    authorizer = DummyAuthorizer()
    authorizer.add_user("eclaw", FTP_PASSWORD, str(root), perm="elradfmw")
    handler = type("Handler", (FTPHandler,), {"authorizer": authorizer, "passive_ports": None})
    server = FTPServer(("127.0.0.1", 0), handler, ioloop=IOLoop())
    thread = threading.Thread(target=server.serve_forever, kwargs={"timeout": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.address[1]}"
    finally:
        server.close_all()
        thread.join(10)


@contextmanager
def postgres(password: str) -> Iterator[PostgresServer]:
    directory = Path(tempfile.mkdtemp(prefix="eclaw-pg-"))  # not under pytest's 0700 tmp: the postgres user reads it
    try:
        with postgres_server(directory) as server:
            server.sql(f"ALTER USER eclaw PASSWORD '{password}'")
            yield server
    finally:
        subprocess.run(["rm", "-rf", str(directory)], check=False)


@dataclass
class Servers:
    s3: str  # moto's endpoint
    ftp: str  # host:port
    ftp_root: Path
    pg: PostgresServer
    proxy: str  # http://u:PASSWORD@host:port


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def servers(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Servers]:
    ftp_root = tmp_path_factory.mktemp("ftp")
    with moto_server() as s3, ftp_server(ftp_root) as ftp, postgres(PG_PASSWORD) as pg:
        s3_client(s3).create_bucket(Bucket="items")  # type: ignore[attr-defined]
        async with tinyproxy(tmp_path_factory.mktemp("proxy"), ("u", PROXY_PASSWORD)) as (proxy, _):
            yield Servers(s3, ftp, ftp_root, pg, f"http://u:{PROXY_PASSWORD}@{proxy}")


def outputs(servers: Servers, ftp_name: str, table: str) -> list[str]:
    """``-o`` options: every new writer at once."""
    pg = servers.pg.url(password=PG_PASSWORD)
    specs = [
        "items.jsonl.gz", "items.jsonl.zst", "items.csv.bz2", "items.json.xz", "crawl.warc.gz",
        "pages.md.jsonl", "pages:markdown", "s3://items/{spider}-{run_key}.jsonl.gz",
        f"ftp://eclaw:{FTP_PASSWORD}@{servers.ftp}/{ftp_name}", f"{pg}?table={table}",
    ]  # fmt: skip
    return [arg for spec in specs for arg in ("-o", spec)]


def env(servers: Servers, tmp: Path) -> dict[str, str]:
    """The child's environment: the S3 server's, its spool (``TMPDIR``) in ``tmp``."""
    return {
        "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp), "TMPDIR": str(tmp),
        "AWS_ACCESS_KEY_ID": "canary-key", "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": servers.s3, "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_EC2_METADATA_DISABLED": "true",
    }  # fmt: skip


async def start(servers: Servers, work: Path, base: str, *extra: str, proxy: bool) -> asyncio.subprocess.Process:
    """``eclaw crawl`` of the canary spider in ``work`` (its spider file outside it), with every writer,
    through tinyproxy with ``proxy``."""
    spider = work.parent / "canary_spider.py"
    spider.write_text(SPIDER)
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eclaw", "crawl", str(spider), "-a", f"base_url={base}", "-a", f"api_token={QUERY_TOKEN}",
        "-s", f"proxies={servers.proxy if proxy else ''}", "-s", "retries=0", "-s", "max_depth=1",
        "-s", "store=store.sqlite", "--state", "state", "-s", "checkpoint_interval=0.2", "--trace", "trace.jsonl",
        "--log-level", "DEBUG", "--log-format", "json", "--log-file", "crawl.log", *extra,
        cwd=work, env=env(servers, work / "tmp"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


async def finish(process: asyncio.subprocess.Process) -> str:
    """Wait for the crawl (a page fails on purpose: exit 0 or 3); its console output."""
    out, err = await asyncio.wait_for(process.communicate(), 180)
    assert process.returncode in (0, 3), err.decode()[-3000:]
    return out.decode() + err.decode()


def remote(servers: Servers, table: str, ftp_name: str) -> list[tuple[str, str]]:
    """What the S3 bucket, the FTP server and the PostgreSQL table hold, as (where, text)."""
    client: Any = s3_client(servers.s3)
    found = []
    for entry in client.list_objects_v2(Bucket="items").get("Contents", []):
        body = client.get_object(Bucket="items", Key=entry["Key"])["Body"].read()
        found += [(f"s3://items/{entry['Key']}", form.decode("latin-1")) for form in decoded(body)]
    for path in sorted(servers.ftp_root.rglob("*")):
        if path.is_file():
            found += [(f"ftp {path.name}", text) for text in texts(path)]
    import psycopg

    with psycopg.connect(servers.pg.url(password=PG_PASSWORD)) as conn, conn.cursor() as cursor:
        rows = cursor.execute(f"SELECT * FROM {table}".encode()).fetchall()
    assert rows, f"no row in the table {table}"
    found.append((f"postgres table {table}", "\n".join(repr(row) for row in rows)))
    return found


# -- the tests ------------------------------------------------------------------------------------


@dataclass
class Crawled:
    work: Path
    console: str
    remote: list[tuple[str, str]]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def crawled(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    """One whole crawl through every writer, then ``eclaw report`` of its trace."""
    work = tmp_path_factory.mktemp("canary") / "work"
    (work / "tmp").mkdir(parents=True)
    async with serve(site()) as base:
        console = await finish(await start(servers, work, base, *outputs(servers, "items.jsonl", "items"), proxy=True))
    code, _, err = await eclaw_inprocess("report", str(work / "trace.jsonl"), "-o", str(work / "report.html"))
    assert code == 0, err
    return Crawled(work, console, remote(servers, "items", "items.jsonl"))


async def test_every_writer_wrote(crawled: Crawled) -> None:
    """Something to search: each output holds the pages or items (the redirect's hop archived too)."""
    work = crawled.work
    for name in ("items.jsonl.gz", "items.jsonl.zst", "items.csv.bz2", "items.json.xz", "pages.md.jsonl"):
        assert b"/b" in b"".join(decoded((work / name).read_bytes())), name
    archive = gzip.decompress((work / "crawl.warc.gz").read_bytes())
    assert b"Authorization: ***" in archive and b"Cookie: ***" in archive
    assert b"Proxy-Authorization: ***" in archive  # the request as sent to the proxy, its credentials masked
    assert b"token=***" in archive and b"token=***" in (work / "crawl.cdxj").read_bytes()
    assert list((work / "pages").glob("*.md")) and list((work / "state").iterdir())
    wheres = {where for where, _ in crawled.remote}
    assert {"s3://items/canary-default.jsonl.gz", "ftp items.jsonl", "postgres table items"} <= wheres


async def test_no_planted_secret_in_any_local_file(crawled: Crawled) -> None:
    """Outputs, archive and index, markdown, state, logs, trace, report, the console."""
    assert leaks([*files(crawled.work), ("the console", crawled.console)]) == []


async def test_no_planted_secret_in_s3_ftp_or_postgres(crawled: Crawled) -> None:
    assert leaks(crawled.remote) == []


async def test_no_planted_secret_in_a_killed_runs_spools_and_state(servers: Servers, tmp_path: Path) -> None:
    """A crawl SIGKILLed after a checkpoint: the S3 spool and the state it leaves, the half-written
    outputs; then its resumed run, and everything both wrote."""
    work = tmp_path / "work"
    (work / "tmp").mkdir(parents=True)
    ftp_name, table, gate = "killed.jsonl", "killed", asyncio.Event()
    async with serve(site(gate)) as base:
        process = await start(servers, work, base, *outputs(servers, ftp_name, table), proxy=False)
        spools = work / "state"  # with --state, a remote output's spool is in the state directory
        saved = f"ftp://eclaw:***@{servers.ftp}/{ftp_name}".encode()  # a checkpoint saved the FTP output's place

        def checkpointed() -> bool:  # the crawl replaces its files as it runs: one listed may be gone when read
            try:
                state = [p.read_bytes() for p in (work / "state").rglob("*") if p.is_file()]
                return any(p.stat().st_size for p in spools.rglob("spool/*")) and any(saved in s for s in state)
            except FileNotFoundError:
                return False

        await until(checkpointed, process)
        os.kill(process.pid, signal.SIGKILL)
        await process.wait()
        gate.set()
        left = files(work)
        assert any("/spool/" in where for where, _ in left)  # the spool is there to search
        assert any(f"ftp://eclaw:***@{servers.ftp}/{ftp_name}" in text for where, text in left if "state" in where)
        # a resumable state keeps, deliberately, what its pending requests must send again and the cookie
        # jars (docs/security.md, "What is kept"); none of the outputs' secrets, nothing outside state.sqlite
        resend = ("URL password", "cookie", "bearer token", "proxy password", "query-string token")
        kept = [leak for leak in leaks(left) if leak.startswith(resend) and "/state/state.sqlite" in leak]
        assert sorted(set(leaks(left)) - set(kept)) == []
        console = await finish(await start(servers, work, base, *outputs(servers, ftp_name, table), proxy=False))
    archive = gzip.decompress((work / "crawl.warc.gz").read_bytes())  # the redirect's hop, its request redacted
    delivered = (servers.ftp_root / ftp_name).read_text()  # resumed with the password given back
    assert delivered.count("\n") == len(PAGES) and '"/landing"' in delivered
    hop = next(record for record in archive.split(b"WARC/1.1\r\n") if b"GET /moved HTTP/1.1" in record)
    assert b"HTTP/1.1 302 Found" in archive and b"Authorization: ***" in hop and b"Cookie: ***" in hop
    assert leaks([*files(work), ("the console", console), *remote(servers, table, ftp_name)]) == []


async def until(condition: Any, process: asyncio.subprocess.Process, seconds: float = 60) -> None:
    """Poll ``condition()`` (a deadline, no fixed sleep) while the crawl runs."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        if process.returncode is not None:
            _, err = await process.communicate()
            raise AssertionError(f"the crawl ended first: {err.decode()[-2000:]}")
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


BAD_SPECS = [
    ("x%(batch)05d.jsonl", ()),  # rotating with no batch size
    ("x%(batch)05d.parquet", ("-s", "output_batch_items=2")),  # Parquet is not rotated
    ("x.warc.gz", ()),  # archives and markdown go to local files only
    ("x.md.jsonl", ()),
    ("d:markdown", ()),
    ("x.jsonl.gz", ()),  # the server refuses the connection
]


async def test_a_bad_output_uri_is_one_line_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-line error of a refused ``ftp://user:PASSWORD@`` output (exit 2) shows ``***``: each
    of :data:`BAD_SPECS` (in this process, one after the other: each fails before any crawl)."""
    spider = tmp_path / "canary_spider.py"
    spider.write_text(SPIDER)
    for n, (spec, extra) in enumerate(BAD_SPECS):
        work = tmp_path / f"work{n}"
        work.mkdir()
        monkeypatch.chdir(work)
        uri = f"ftp://eclaw:{FTP_PASSWORD}@127.0.0.1:9/{spec}"
        code, out, err = await eclaw_inprocess("crawl", str(spider), "-o", uri, "-s", "store=", *extra)
        assert code == 2, (spec, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "ftp://eclaw:***@127.0.0.1:9/" in lines[0], lines
        assert leaks([("the console", out + err), *files(work)]) == []
