"""``-o crawl.warc.gz`` through the real CLI: the records read back with warcio are valid, their
digests right, their bodies the bytes the site sent; secrets are redacted; the CDXJ index points
at each record; a recrawl writes unchanged pages as revisits; ``.warc`` is the same, uncompressed."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from warcio.archiveiterator import ArchiveIterator

from eclaw.testing import serve
from tests.archive.helpers import ROOT, SPIDER, Record, read_archive, sha1_b32
from tests.archive.running import crawl_here
from tests.archive.site import FAILED, GZ_DECODED, PARSED, REDIRECTS, SENT, TOKEN, make_app
from tests.forkserver import PIPE, spawn

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Crawled:
    base: str
    folder: Path
    first: Path  # .warc.gz
    second: Path  # the recrawl, .warc.gz
    plain: Path  # .warc


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def crawled(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Crawled]:
    """One site for the module, crawled three times: first.warc.gz, second.warc.gz (a recrawl of
    the same spider and run key, so revisits), and another run key to plain.warc."""
    folder = tmp_path_factory.mktemp("archives")
    async with serve(make_app()) as base:
        await crawl_here("-a", f"base_url={base}", "-o", "first.warc.gz", cwd=folder)
        await crawl_here("-a", f"base_url={base}", "-o", "second.warc.gz", cwd=folder)
        await crawl_here("-a", f"base_url={base}", "-o", "plain.warc", "-s", "run_key=other", cwd=folder)
        yield Crawled(base, folder, folder / "first.warc.gz", folder / "second.warc.gz", folder / "plain.warc")


def by_kind(records: list[Record], kind: str) -> dict[str, Record]:
    found = {r.path: r for r in records if r.kind == kind}
    assert len(found) == sum(r.kind == kind for r in records), f"a page has two {kind} records"
    return found


async def test_records_are_valid_and_hold_the_bytes_the_site_sent(crawled: Crawled) -> None:
    records = read_archive(crawled.first)
    assert records[0].kind == "warcinfo" and b"eclaw/" in records[0].payload
    assert all(r.headers["WARC-Type"] == r.kind for r in records)
    assert {r.headers.get("WARC-Date", "")[:2] for r in records} == {"20"}
    assert all(r.digests_passed is not False for r in records), "warcio found a bad digest"
    responses, requests = by_kind(records, "response"), by_kind(records, "request")
    assert set(responses) == PARSED | FAILED | REDIRECTS
    for path, (kind, body) in SENT.items():
        record = responses[path]
        assert record.payload == body, path  # the gzip page's compressed bytes, the binary file whole
        assert record.headers["WARC-Payload-Digest"] == sha1_b32(body)
        assert record.http is not None and record.http.get_header("Content-Type") == kind
        assert record.headers["WARC-IP-Address"] == "127.0.0.1"
    assert gzip.decompress(responses["/gz"].payload) == GZ_DECODED
    assert responses["/gz"].http.get_header("Content-Encoding") == "gzip"  # type: ignore[union-attr]
    assert responses["/missing"].http.get_statuscode() == "404"  # type: ignore[union-attr]
    assert responses["/"].http.statusline == "200 OK"  # type: ignore[union-attr]
    sent = requests["/gz"].http
    assert sent is not None and "gzip" in sent.get_header("Accept-Encoding", "")  # the headers as sent, the client's
    for path, response in responses.items():  # each request record names its response
        assert requests[path].headers["WARC-Concurrent-To"] == response.headers["WARC-Record-ID"]
        assert requests[path].http.protocol == "GET"  # type: ignore[union-attr]
    assert all(r.headers["WARC-Record-ID"].startswith("<urn:uuid:") for r in records)


async def test_a_redirect_archives_each_hop_then_the_page_it_led_to(crawled: Crawled) -> None:
    """The 302 is archived under its own URL, with its Location and body as sent, and its request
    (credentials redacted), before the page it led to; the index names both; a recrawl writes the
    hop again as a response (a replay follows it), the page as a revisit."""
    records = read_archive(crawled.first)
    responses, requests = by_kind(records, "response"), by_kind(records, "request")
    hop, landing = responses["/moved"], responses["/landing"]
    assert hop.http is not None and hop.http.get_statuscode() == "302"
    assert hop.http.get_header("Location") == "/landing"
    assert hop.payload == b"302: Found" and hop.headers["WARC-Payload-Digest"] == sha1_b32(b"302: Found")
    assert requests["/moved"].headers["WARC-Concurrent-To"] == hop.headers["WARC-Record-ID"]
    assert landing.payload == SENT["/landing"][1] and landing.http.get_statuscode() == "200"  # type: ignore[union-attr]
    assert records.index(requests["/moved"]) < records.index(landing)  # the hop first, as it happened
    index = [json.loads(line.split(" ", 2)[2]) for line in (crawled.folder / "first.cdxj").read_text().splitlines()]
    assert {"url": crawled.base + "/moved", "status": "302"}.items() <= next(
        fields for fields in index if fields["url"].endswith("/moved")
    ).items()
    again = by_kind(read_archive(crawled.second), "response")
    assert again["/moved"].http.get_statuscode() == "302"  # type: ignore[union-attr]


async def test_credentials_are_redacted_and_never_in_the_file(crawled: Crawled) -> None:
    records = read_archive(crawled.first)
    private = by_kind(records, "request")["/private"]
    assert private.http.get_header("Authorization") == "***"  # type: ignore[union-attr]
    assert private.http.get_header("Cookie") == "***"  # type: ignore[union-attr]
    response = by_kind(records, "response")["/private"]
    assert response.http.get_header("Set-Cookie") == "***"  # type: ignore[union-attr]
    for path in (crawled.first, crawled.second):
        assert TOKEN.encode() not in gzip.decompress(path.read_bytes())
    assert TOKEN.encode() not in crawled.plain.read_bytes()


async def test_the_cdxj_index_is_sorted_and_points_at_each_record(crawled: Crawled) -> None:
    index = crawled.folder / "first.cdxj"
    lines = index.read_text().splitlines()
    assert lines == sorted(lines)
    assert not (crawled.folder / "first.cdxj.part").exists()
    records = {r.offset: r for r in read_archive(crawled.first)}
    with crawled.first.open("rb") as file:
        for line in lines:
            key, timestamp, text = line.split(" ", 2)
            fields = json.loads(text)
            record = records[int(fields["offset"])]
            assert record.length == int(fields["length"]) and record.uri == fields["url"]
            assert record.kind in ("response", "revisit") and fields["filename"] == "first.warc.gz"
            assert fields["digest"] == record.headers["WARC-Payload-Digest"].removeprefix("sha1:")
            assert key.endswith(")" + record.path) and len(timestamp) == 14
            file.seek(int(fields["offset"]))  # the member alone is a whole record
            assert next(iter(ArchiveIterator(file))).rec_headers.get_header("WARC-Target-URI") == fields["url"]
    assert len(lines) == sum(r.kind == "response" for r in records.values())


async def test_a_recrawl_writes_unchanged_pages_as_revisits(crawled: Crawled) -> None:
    first = by_kind(read_archive(crawled.first), "response")
    second = read_archive(crawled.second)
    revisits, responses = by_kind(second, "revisit"), by_kind(second, "response")
    assert set(revisits) == set(first) - {"/changing"} - REDIRECTS
    assert set(responses) == {"/changing"} | REDIRECTS  # its body differs on every visit; a hop is never a revisit
    for path, revisit in revisits.items():
        original = first[path]
        assert revisit.headers["WARC-Profile"] == "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
        assert revisit.headers["WARC-Refers-To"] == original.headers["WARC-Record-ID"]
        assert revisit.headers["WARC-Refers-To-Target-URI"] == original.uri
        assert revisit.headers["WARC-Refers-To-Date"] == original.headers["WARC-Date"]
        assert revisit.headers["WARC-Payload-Digest"] == original.headers["WARC-Payload-Digest"]
        assert revisit.payload == b"" and revisit.http is not None  # headers only
    lines = (crawled.folder / "second.cdxj").read_text().splitlines()
    assert sum('"mime": "warc/revisit"' in line for line in lines) == len(revisits)


async def test_an_uncompressed_archive_and_another_run_key(crawled: Crawled) -> None:
    records = read_archive(crawled.plain)
    assert crawled.plain.read_bytes().startswith(b"WARC/1.1\r\n")
    responses = by_kind(records, "response")  # another run key: no revisit of the first crawls
    assert not by_kind(records, "revisit")
    assert responses["/file.bin"].payload == SENT["/file.bin"][1]
    assert responses["/latin"].payload == SENT["/latin"][1]
    lines = (crawled.folder / "plain.cdxj").read_text().splitlines()
    offsets = sorted(int(json.loads(line.split(" ", 2)[2])["offset"]) for line in lines)
    assert offsets == sorted(r.offset for r in records if r.kind == "response")


async def test_without_the_warc_extra_one_line_and_exit_2(tmp_path: Path) -> None:
    """warcio missing (a package on the path that fails to import stands for it): one clear line, exit 2."""
    fake = tmp_path / "fake" / "warcio"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'warcio'\")\n")
    process = await spawn(  # forked from the fork server, which never imports warcio
        "crawl", SPIDER, "-a", "base_url=http://127.0.0.1:1", "-s", "store=",
        "-o", "x.warc.gz", cwd=tmp_path, stdout=PIPE, stderr=PIPE,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path / 'fake'}:{ROOT}"},
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    [line] = stderr.decode().strip().splitlines()
    assert "x.warc.gz: web archives need the warc extra: pip install 'eclaw[warc]'" in line
    assert not (tmp_path / "x.warc.gz").exists()
