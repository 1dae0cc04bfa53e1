"""The parts of the WARC output on their own: a body over the bound is cut with ``WARC-Truncated``,
secrets in URLs and headers are masked, the index is sorted across runs, a bad path is one line."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from eclaw.archive import cdxj as cdxj_module
from eclaw.archive.cdxj import index_path, read_index, sort_index
from eclaw.archive.exchange import Exchange
from eclaw.archive.records import RecordWriter, payload_digest
from eclaw.archive.warc import WarcOutput
from eclaw.exceptions import ConfigError
from eclaw.security.redact import Redactor
from tests.archive.helpers import sha1_b32


def exchange(body: bytes, url: str = "http://user:hunter22@example.com/a?b=1") -> Exchange:
    return Exchange(
        url=url, method="GET", request_headers=[("Authorization", "Basic dXNlcjpodW50ZXIyMg=="), ("Accept", "*/*")],
        request_body=b"", version="1.1", status=200, reason="OK",
        headers=[("Content-Type", "text/plain"), ("X-Note", "token hunter22 here"), ("Set-Cookie", "a=1")],
        body=body, date=dt.datetime(2026, 12, 4, 12, 0, 1, 250_000, tzinfo=dt.UTC), ip="10.0.0.1",
    )  # fmt: skip


def read(data: bytes) -> list[tuple[str, dict[str, str], bytes, object]]:
    found = []
    for record in ArchiveIterator(io.BytesIO(data), check_digests=True):
        payload = record.raw_stream.read()
        found.append((record.rec_type, dict(record.rec_headers.headers), payload, record.http_headers))
        assert record.digest_checker.passed is not False
    return found


@pytest.mark.parametrize("gzip", [True, False])
def test_a_body_over_the_bound_is_cut_and_says_so(gzip: bool) -> None:
    writer = RecordWriter(Redactor(), gzip=gzip, max_bytes=10)
    ex = exchange(b"0123456789abcdef")
    kept = writer.body_kept(ex)
    written = writer.response(ex, payload_digest(kept))
    [(kind, headers, payload, _)] = read(written.data)
    assert kind == "response" and payload == b"0123456789"
    assert headers["WARC-Truncated"] == "length"
    assert headers["WARC-Payload-Digest"] == sha1_b32(b"0123456789")
    assert headers["WARC-Date"] == "2026-12-04T12:00:01.250000Z" and headers["WARC-IP-Address"] == "10.0.0.1"
    assert written.data.startswith(b"\x1f\x8b") == gzip


def test_secrets_are_masked_in_uris_and_headers() -> None:
    redactor = Redactor()
    redactor.learn_pair("user", "hunter22")
    writer = RecordWriter(redactor, gzip=False, max_bytes=1000)
    ex = exchange(b"body")
    response = writer.response(ex, payload_digest(b"body"))
    request = writer.request(ex, response.record_id)
    data = response.data + request.data
    assert b"hunter22" not in data and b"dXNlcjpodW50ZXIyMg" not in data
    (_, headers, _, http), (_, request_headers, _, request_http) = read(data)
    assert headers["WARC-Target-URI"] == "http://user:***@example.com/a?b=1"
    assert http.get_header("X-Note") == "token *** here" and http.get_header("Set-Cookie") == "***"  # type: ignore[attr-defined]
    assert request_http.get_header("Authorization") == "***"  # type: ignore[attr-defined]
    assert request_http.get_header("Host") == "example.com"  # type: ignore[attr-defined]
    assert request_http.protocol == "GET" and request_http.statusline.startswith("/a?b=1")  # type: ignore[attr-defined]
    assert request_headers["WARC-Concurrent-To"] == headers["WARC-Record-ID"]


def test_the_index_is_sorted_across_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cdxj_module, "RUN_LINES", 7)  # several runs, merged
    spool = tmp_path / "x.cdxj.part"
    lines = [f"com,example)/{n:03d} 20261204120000 {{\"offset\": \"{n}\"}}\n" for n in range(50)]
    spool.write_text("".join(reversed(lines)))
    sort_index(spool, tmp_path / "x.cdxj")
    assert (tmp_path / "x.cdxj").read_text() == "".join(lines)
    assert [fields["offset"] for _, _, fields in read_index(tmp_path / "x.cdxj")] == [str(n) for n in range(50)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.cdxj", "x.cdxj.part"]  # no run file left


def test_index_names_and_bad_paths(tmp_path: Path) -> None:
    assert index_path(tmp_path / "crawl.warc.gz") == tmp_path / "crawl.cdxj"
    assert index_path(tmp_path / "crawl.warc") == tmp_path / "crawl.cdxj"
    with pytest.raises(ConfigError, match=r"ends in \.warc or \.warc\.gz"):
        WarcOutput(tmp_path / "crawl.zip")
    with pytest.raises(ConfigError, match="output directory does not exist"):
        WarcOutput(tmp_path / "nowhere" / "crawl.warc.gz").check("spider")
