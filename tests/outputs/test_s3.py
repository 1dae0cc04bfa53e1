"""``-o s3://bucket/key``: against a real moto S3 server on 127.0.0.1. A crawl delivers every item once;
SIGKILL then ``--state`` resume still gives every item once; parts ≥ 5 MiB are sent at checkpoints and
a killed run's upload is resumed or redone; a bad bucket, credentials or endpoint is one line, exit 2."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eclaw.outputs.s3 import PART_SIZE, S3Destination
from eclaw.outputs.spec import parse_spec
from eclaw.testing import serve
from tests.inprocess import eclaw_inprocess
from tests.outputs.forked import Child, eclaw_forked, start_forked
from tests.outputs.servers import CREDENTIALS, free_port, moto_server, s3_client
from tests.outputs.state_part import SPIDER, expected, make_app

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        client: Any = s3_client(url)
        client.create_bucket(Bucket="items")
        yield url


@pytest.fixture(autouse=True)
def aws_env(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(name, value)


def env(endpoint: str, **extra: str) -> dict[str, str]:
    """The child's environment; an ``extra`` value ``""`` removes that variable."""
    full = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
            "HOME": os.environ.get("HOME", "/root"), "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_EC2_METADATA_DISABLED": "true",
            **CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, **extra}  # fmt: skip
    return {name: value for name, value in full.items() if value}


def pages_in(endpoint: str, key: str) -> list[int]:
    body = s3_client(endpoint).get_object(Bucket="items", Key=key)["Body"].read()  # type: ignore[attr-defined]
    return [int(json.loads(line)["page"]) for line in gzip.decompress(body).splitlines()]


async def start(endpoint: str, base: str, tmp: Path, key: str, **extra: str) -> Child:
    return await start_forked(
        "crawl", SPIDER, "-a", f"base_url={base}", "--state", str(tmp / "state"),
        "-o", str(tmp / "gauge.jsonl"), "-o", f"s3://items/{key}", "-s", "checkpoint_interval=0.2",
        "-s", f"failures={tmp / 'failures.jsonl'}", "-s", f"dead_letter={tmp / 'dead.jsonl'}", "-s", "store=",
        "--log-level", "WARNING", cwd=tmp, env=env(endpoint, **extra),
    )  # fmt: skip


async def kill_when(process: Child, count: int, tmp: Path) -> None:
    gauge = tmp / "gauge.jsonl"
    for _ in range(3000):  # a minute at most
        if (gauge.exists() and gauge.read_bytes().count(b"\n") >= count) or process.returncode is not None:
            break
        await asyncio.sleep(0.02)
    process.kill()
    await process.wait()


async def test_a_crawl_delivers_every_item_once(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``eclaw crawl`` by the CLI's main in this process (the SIGKILL test runs it as a process); the run's
    own spool folder (no ``--state``) is gone once the items are delivered."""
    for name, value in env(endpoint).items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    async with serve(make_app(delay=0)) as base:
        code, _, stderr = await eclaw_inprocess(
            "crawl", SPIDER, "-a", f"base_url={base}", "-o", "s3://items/{spider}.jsonl.gz", "-s", "store=",
            "-s", f"failures={tmp_path / 'failures.jsonl'}", "--log-level", "WARNING",
        )  # fmt: skip
    assert code == 0, stderr[-2000:]
    pages = pages_in(endpoint, "state-site.jsonl.gz")
    assert sorted(pages) == sorted(expected()[0])
    assert list((tmp_path / "tmp" / "eclaw-spool").iterdir()) == []


async def test_sigkill_then_resume_gives_every_item_once(endpoint: str, tmp_path: Path) -> None:
    parsed = expected()[0]
    async with serve(make_app()) as base:
        for target in (len(parsed) // 4, len(parsed) // 2):
            process = await start(endpoint, base, tmp_path, "killed.jsonl.gz")
            await kill_when(process, target, tmp_path)
            assert list((tmp_path / "state").rglob("spool/*")), "the spool is not in the state directory"
        process = await start(endpoint, base, tmp_path, "killed.jsonl.gz")
        _, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-2000:]
    pages = pages_in(endpoint, "killed.jsonl.gz")
    assert len(pages) == len(set(pages)), "an item was written twice"
    assert set(pages) == parsed


def sink_for(key: str, spools: Path) -> Any:
    destination = S3Destination(parse_spec(f"s3://items/{key}"))
    return destination, destination.open(f"s3://items/{key}", spools / key)


async def test_parts_at_checkpoints_and_a_killed_upload_resumed(endpoint: str, tmp_path: Path) -> None:
    destination, sink = sink_for("big.jsonl", tmp_path)
    chunk = os.urandom(PART_SIZE // 2)
    sink.write(chunk)
    assert (await sink.commit())["parts"] == []  # under 5 MiB: kept in the spool
    sink.write(chunk)
    saved = await sink.commit()
    assert len(saved["parts"]) == 1 and saved["upload_id"]
    sink.write(b"after the checkpoint, never delivered")
    sink._fd = None  # the process dies here: nothing closed, nothing completed
    again = destination.reopen("s3://items/big.jsonl", tmp_path / "big.jsonl")
    await again.resume(saved)
    again.write(b"tail")
    await again.finish()
    body = s3_client(endpoint).get_object(Bucket="items", Key="big.jsonl")["Body"].read()  # type: ignore[attr-defined]
    assert body == chunk + chunk + b"tail"


async def test_a_vanished_upload_is_redone_from_the_spool(endpoint: str, tmp_path: Path) -> None:
    destination, sink = sink_for("redo.jsonl", tmp_path)
    data = os.urandom(PART_SIZE)
    sink.write(data)
    saved = await sink.commit()
    s3_client(endpoint).abort_multipart_upload(Bucket="items", Key="redo.jsonl", UploadId=saved["upload_id"])  # type: ignore[attr-defined]
    again = destination.reopen("s3://items/redo.jsonl", tmp_path / "redo.jsonl")
    await again.resume(saved)
    await again.finish()
    body = s3_client(endpoint).get_object(Bucket="items", Key="redo.jsonl")["Body"].read()  # type: ignore[attr-defined]
    assert body == data


async def test_a_failed_commit_keeps_the_bytes_for_the_next(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    port = free_port()
    with moto_server(port) as url:
        s3_client(url).create_bucket(Bucket="items")  # type: ignore[attr-defined]
        destination = S3Destination(parse_spec(f"s3://items/later.jsonl?endpoint={url}"))
        sink = destination.open("s3://items/later.jsonl", tmp_path / "later.jsonl")
        data = os.urandom(PART_SIZE)
        sink.write(data)
    saved = await sink.commit()  # the server is gone: one line, the bytes kept
    assert saved["parts"] == [] and saved["size"] == len(data)
    said = [r.getMessage() for r in caplog.records if r.name == "eclaw.outputs.spool"]
    assert len(said) == 1 and said[0].startswith("output s3://items/later.jsonl: "), said
    with moto_server(port) as url:  # back (moto's memory is empty: the bucket made again)
        s3_client(url).create_bucket(Bucket="items")  # type: ignore[attr-defined]
        await sink.commit()
        await sink.finish()
        assert s3_client(url).get_object(Bucket="items", Key="later.jsonl")["Body"].read() == data  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "extra", "said"),
    [("s3://nosuch/x.jsonl", {}, "output s3://nosuch/x.jsonl: the bucket does not exist"),
     ("s3://items/x.jsonl", {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}, "output s3://items/x.jsonl: "),
     ("s3://items/x.jsonl", {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""},
      "output s3://items/x.jsonl: Unable to locate credentials")],
)  # fmt: skip
async def test_bad_bucket_endpoint_or_credentials_is_one_line_and_exit_2(
    endpoint: str, tmp_path: Path, spec: str, extra: dict[str, str], said: str
) -> None:
    code, _, stderr = await eclaw_forked(
        "crawl", SPIDER, "-a", "base_url=http://127.0.0.1:1", "-o", spec, "-s", "store=",
        cwd=tmp_path, env=env(endpoint, **extra), wait=60,
    )  # fmt: skip
    assert code == 2, stderr
    assert said in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "testing-secret" not in stderr
