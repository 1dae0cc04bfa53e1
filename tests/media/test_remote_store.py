"""``files_store`` as a destination URI, against a real moto S3 server (and pyftpdlib) on 127.0.0.1: files
are staged locally, uploaded by content to ``{uri}/{path}``, checked before the crawl, kept and delivered
on the next run when an upload fails, and a SIGKILL mid-file then a new run leaves no orphan, no duplicate."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from eclaw import Settings
from eclaw.exceptions import ConfigError
from eclaw.media.remote import local_root, outbox_for
from eclaw.media.store import FileStore
from eclaw.testing import collect, serve
from tests.forkserver import PIPE, spawn
from tests.media.remote_site import MB, Listed, content, make_app
from tests.outputs.forked import eclaw_forked
from tests.outputs.servers import CREDENTIALS, ftp_server, moto_server, s3_client

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).parents[2]
SPIDER = str(Path(__file__).with_name("remote_site.py")) + ":Listed"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture(autouse=True)
def aws_env(endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)  # the remote stores' local folders (eclaw-data/...) land here


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def site() -> Any:
    hits: dict[str, int] = {}
    gates: dict[str, asyncio.Event] = {}
    async with serve(make_app(hits, gates)) as base:
        yield base, hits, gates


def bucket(endpoint: str, name: str) -> Any:
    client: Any = s3_client(endpoint)
    client.create_bucket(Bucket=name)
    return client


def objects(client: Any, name: str) -> dict[str, bytes]:
    listed = client.list_objects_v2(Bucket=name).get("Contents", [])
    return {o["Key"]: client.get_object(Bucket=name, Key=o["Key"])["Body"].read() for o in listed}


def stray_files(store: str) -> list[Path]:
    """The files left in a remote store's local folder (its index aside)."""
    root = local_root(store, "listed", None)
    return [p for p in root.rglob("*") if p.is_file() and not p.name.startswith("index.sqlite")]


async def wait_for(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def test_files_go_to_s3_by_content_and_are_not_fetched_again(endpoint: str, site: Any) -> None:
    base, hits, _ = site
    client = bucket(endpoint, "plain")
    settings = Settings(files_store="s3://plain/media", store="")
    [item], _ = await collect(Listed, settings=settings, base=base, files="/f/1.bin,/f/2.txt,/f/1.bin")
    one, two, again = item["files"]
    assert one["status"] == two["status"] == "downloaded" and again["checksum"] == one["checksum"]
    assert one["path"] == f"full/{one['checksum'][:2]}/{one['checksum']}.bin"
    stored = objects(client, "plain")
    assert stored == {f"media/{one['path']}": content("1.bin"), f"media/{two['path']}": content("2.txt")}
    assert stray_files("s3://plain/media") == []  # delivered: nothing kept locally but the index
    [item], _ = await collect(Listed, settings=settings, base=base, files="/f/1.bin,/f/2.txt")
    assert [f["status"] for f in item["files"]] == ["uptodate", "uptodate"] and hits["1.bin"] == 1


async def test_a_missing_bucket_or_an_unknown_scheme_stops_the_crawl_before_it_starts(site: Any) -> None:
    base, hits, _ = site
    with pytest.raises(ConfigError, match=r"^files_store s3://nosuch/media: the bucket does not exist$"):
        await collect(Listed, settings=Settings(files_store="s3://nosuch/media", store=""), base=base, files="/f/9.b")
    with pytest.raises(ConfigError, match=r"^setting 'files_store': unknown output destination \(URL scheme\) 'no'"):
        await collect(Listed, settings=Settings(files_store="no://x/y", store=""), base=base, files="/f/9.b")
    with pytest.raises(ConfigError, match=r"^files_store stdout://x: stdout takes stream formats only"):
        await collect(Listed, settings=Settings(files_store="stdout://x", store=""), base=base, files="/f/9.b")
    assert "9.b" not in hits


@pytest.mark.parametrize(
    ("store", "said"),
    [("s3://nosuch/files", "eclaw: error: files_store s3://nosuch/files: the bucket does not exist"),  # docs/files.md
     ("ftp://eclaw:s3cret@127.0.0.1:1/files", "files_store ftp://eclaw:***@127.0.0.1:1/files: ")],
)  # fmt: skip
async def test_a_bad_store_on_the_command_line_is_one_line_and_exit_2(
    endpoint: str, tmp_path: Path, store: str, said: str
) -> None:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "HOME": os.environ.get("HOME", "/root"),
           "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
           "AWS_EC2_METADATA_DISABLED": "true", **CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}  # fmt: skip
    code, _, stderr = await eclaw_forked(
        "crawl", SPIDER, "-a", "base=http://127.0.0.1:1", "-a", "files=/f/1", "-s", f"files_store={store}",
        "-s", "store=", cwd=tmp_path, env=env, wait=60,
    )  # fmt: skip
    assert code == 2, stderr
    assert said in stderr and "s3cret" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    if store.startswith("s3:"):  # the line docs/files.md shows
        assert said in (ROOT / "docs" / "files.md").read_text(encoding="utf-8")


async def test_an_upload_failure_marks_the_file_failed_and_the_next_run_delivers_it(
    endpoint: str, site: Any
) -> None:
    base, hits, gates = site
    client = bucket(endpoint, "flaky")
    settings = Settings(files_store="s3://flaky/media", store="")
    crawl = asyncio.ensure_future(collect(Listed, settings=settings, base=base, files="/gated/g1.bin"))
    await wait_for(lambda: hits.get("g1.bin", 0) == 1)
    client.delete_bucket(Bucket="flaky")  # checked at start, gone when the file is to be uploaded
    gates.setdefault("g1.bin", asyncio.Event()).set()
    [item], _ = await crawl
    [failed] = item["files"]
    assert failed["status"] == "failed" and failed["reason"].endswith("the bucket does not exist")
    assert failed["checksum"] == hashlib.sha256(content("g1.bin")).hexdigest()
    assert [p.name for p in stray_files("s3://flaky/media")] == [Path(failed["path"]).name]  # kept staged
    client.create_bucket(Bucket="flaky")
    [item], _ = await collect(Listed, settings=settings, base=base, files="/gated/g1.bin")
    assert item["files"][0]["status"] == "uptodate" and hits["g1.bin"] == 1  # delivered as the store opened
    assert objects(client, "flaky") == {f"media/{failed['path']}": content("g1.bin")}
    assert stray_files("s3://flaky/media") == []


async def test_a_file_sent_but_not_struck_off_is_sent_once_and_an_orphan_removed(
    endpoint: str, tmp_path: Path
) -> None:
    """The two moments a SIGKILL can strike between steps: renamed but not listed (an orphan), and
    uploaded but not struck off the outbox (sent again: the same key, the same bytes)."""
    client = bucket(endpoint, "crash")
    root = tmp_path / "local"
    store = FileStore(root, outbox=outbox_for("s3://crash/m"))
    await store.open()
    store.close()
    listed, orphan = root / "full" / "ab" / "abc.bin", root / "full" / "cd" / "cde.bin"
    for path in (listed, orphan):
        path.parent.mkdir(parents=True)
        path.write_bytes(path.name.encode())
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(root / "index.sqlite")) as db, db:  # a connection's `with` commits, never closes
        db.execute("INSERT INTO outbox VALUES ('full/ab/abc.bin')")
    client.put_object(Bucket="crash", Key="m/full/ab/abc.bin", Body=b"abc.bin")  # sent before the kill
    store = FileStore(root, outbox=outbox_for("s3://crash/m"))
    await store.open()
    store.close()
    assert objects(client, "crash") == {"m/full/ab/abc.bin": b"abc.bin"}
    assert not listed.exists() and not orphan.exists()


async def test_sigkill_mid_file_then_a_rerun_leaves_no_orphan_and_no_duplicate(
    endpoint: str, site: Any, tmp_path: Path
) -> None:
    base, _, gates = site
    client = bucket(endpoint, "killed")
    store = "s3://killed/m"
    args = ["crawl", SPIDER, "-a", f"base={base}", "-a", "files=/f/done.bin,/slow/k.bin",
            "-s", f"files_store={store}", "-s", "store=", "-o", str(tmp_path / "items.jsonl"),
            "--log-level", "WARNING"]  # fmt: skip
    staging = tmp_path / local_root(store, "listed", None) / "tmp"
    log = (tmp_path / "first.log").open("wb")
    first = await spawn(*args, cwd=tmp_path, stderr=log)
    partial = lambda: staging.is_dir() and any(p.stat().st_size >= MB for p in staging.iterdir())  # noqa: E731
    await wait_for(lambda: partial() and len(objects(client, "killed")) == 1, 60)
    first.send_signal(signal.SIGKILL)
    await first.wait()
    log.close()
    gates.setdefault("k.bin", asyncio.Event()).set()
    second = await spawn(*args, cwd=tmp_path, stderr=PIPE)
    try:
        _, stderr = await asyncio.wait_for(second.communicate(), timeout=60)
    finally:
        if second.returncode is None:
            second.kill()
            _, stderr = await second.communicate()
            raise AssertionError(f"the resumed run hung: {stderr.decode()[-3000:]}")
    assert second.returncode == 0, stderr.decode()[-2000:]
    [item] = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    done, slow = item["files"]
    assert slow["checksum"] == hashlib.sha256(b"a" * MB + b"b" * MB).hexdigest() and slow["status"] == "downloaded"
    stored = objects(client, "killed")
    assert sorted(stored) == sorted(f"m/{f['path']}" for f in (done, slow))  # each once
    for key, body in stored.items():
        assert hashlib.sha256(body).hexdigest() == Path(key).stem  # whole files only
    assert stray_files(store) == []  # no partial, no orphan, nothing waiting


async def test_images_and_their_thumbnails_go_to_s3(endpoint: str, tmp_path: Path) -> None:
    from aiohttp import web
    from PIL import Image

    from eclaw import Spider
    from eclaw.media import ImagesPipeline

    photo = io.BytesIO()
    Image.new("RGB", (300, 200), "teal").save(photo, format="JPEG")
    app = web.Application()

    async def jpeg(request: web.Request) -> web.Response:
        return web.Response(body=photo.getvalue(), content_type="image/jpeg")

    app.router.add_get("/p.jpg", jpeg)

    class Gallery(Spider):
        name = "listed"
        pipelines = [ImagesPipeline]

        def parse(self, response: Any) -> Any:
            yield {"image_urls": [response.url]}

    client = bucket(endpoint, "gallery")
    settings = Settings(files_store="s3://gallery/i", store="", images_thumbs="small=50x50")
    async with serve(app) as base:
        [item], _ = await collect(Gallery, settings=settings, start_urls=[base + "/p.jpg"])
    [image] = item["images"]
    assert image["status"] == "downloaded" and (image["width"], image["height"]) == (300, 200)
    assert set(objects(client, "gallery")) == {f"i/{image['path']}", f"i/{image['thumbs']['small']}"}
    assert stray_files("s3://gallery/i") == []


async def test_files_go_to_an_ftp_server_in_folders_it_makes(site: Any, tmp_path: Path) -> None:
    base, _, _ = site
    (tmp_path / "ftp" / "files").mkdir(parents=True)
    with ftp_server(str(tmp_path / "ftp")) as address:
        store = f"ftp://eclaw:s3cret@{address}/files"
        root = local_root(store, "listed", None)  # now: the FTP server in this process chdirs it (pyftpdlib)
        [item], _ = await collect(Listed, settings=Settings(files_store=store, store=""), base=base, files="/f/3.pdf")
    [stored] = item["files"]
    assert stored["status"] == "downloaded"
    assert (tmp_path / "ftp" / "files" / stored["path"]).read_bytes() == content("3.pdf")
    assert [p for p in root.rglob("*") if p.is_file() and not p.name.startswith("index.sqlite")] == []
