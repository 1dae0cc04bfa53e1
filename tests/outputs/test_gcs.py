"""``-o gs://bucket/key``: against a real GCS JSON API server (gcp-storage-emulator) on 127.0.0.1. A crawl
delivers every item once; SIGKILL then ``--state`` resume still gives every item once; parts are sent at
checkpoints and composed at the end, a killed run's parts are resumed or redone; a bad bucket, endpoint or
credentials is one line, exit 2; the commands of docs/destinations.md's GCS section run as written."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eclaw import Engine
from eclaw.exceptions import ConfigError
from eclaw.outputs import gcs
from eclaw.outputs.gcs import PART_SIZE, GCSDestination
from eclaw.outputs.spec import parse_spec
from eclaw.testing import demo_site, serve
from tests.outputs.gcs_server import (
    gcs_client,
    gcs_emulator,
    object_bytes,
    object_names,
    refusing_token_server,
    service_account_file,
)
from tests.outputs.servers import free_port
from tests.state.site import StateSpider, expected, make_app

ROOT = Path(__file__).parents[2]
SPIDER = str(ROOT / "tests" / "state" / "site.py") + ":StateSpider"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with gcs_emulator(buckets=("items", "my-bucket")) as url:
        yield url


@pytest.fixture(autouse=True)
def gcs_env(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)


def env(endpoint: str, **extra: str) -> dict[str, str]:
    """The child's environment (no Google Cloud machine, no gcloud config); an ``extra`` value ``""`` removes
    that variable."""
    full = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
            "HOME": os.environ.get("HOME", "/root"), "CLOUDSDK_CONFIG": "/nonexistent", "NO_GCE_CHECK": "true",
            "STORAGE_EMULATOR_HOST": endpoint, **extra}  # fmt: skip
    return {name: value for name, value in full.items() if value}


def pages_in(endpoint: str, key: str) -> list[int]:
    body = object_bytes(endpoint, key)
    return [int(json.loads(line)["page"]) for line in gzip.decompress(body).splitlines()]


async def start(endpoint: str, base: str, tmp: Path, *specs: str) -> asyncio.subprocess.Process:
    outputs = [arg for spec in specs for arg in ("-o", f"gs://items/{spec}")]
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eclaw", "crawl", SPIDER, "-a", f"base_url={base}", "--state", str(tmp / "state"),
        "-o", str(tmp / "gauge.jsonl"), *outputs, "-s", "checkpoint_interval=0.2",
        "-s", f"failures={tmp / 'failures.jsonl'}", "-s", f"dead_letter={tmp / 'dead.jsonl'}", "-s", "store=",
        "--log-level", "WARNING", cwd=tmp, env=env(endpoint), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


async def kill_when(process: asyncio.subprocess.Process, count: int, tmp: Path) -> None:
    gauge = tmp / "gauge.jsonl"
    for _ in range(3000):  # a minute at most
        if (gauge.exists() and gauge.read_bytes().count(b"\n") >= count) or process.returncode is not None:
            break
        await asyncio.sleep(0.02)
    if process.returncode is None:
        process.kill()
    await process.wait()


async def test_a_crawl_delivers_every_item_once(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the crawl in this process (the CLI's own run is the SIGKILL test's)
    specs = ["gs://items/{spider}.jsonl.gz", "gs://items/{spider}.sqlite"]  # a stream, a whole-file format
    async with serve(make_app(delay=0)) as base, Engine(overrides={"store": ""}, outputs=specs) as engine:
        await engine.crawl(StateSpider, base_url=base)
    assert sorted(pages_in(endpoint, "state-site.jsonl.gz")) == sorted(expected()[0])
    assert object_bytes(endpoint, "state-site.sqlite").startswith(b"SQLite format 3\0")
    assert not [name for name in object_names(endpoint) if name.startswith("state-site.") and gcs.PARTS in name]


async def test_sigkill_then_resume_gives_every_item_once(endpoint: str, tmp_path: Path) -> None:
    parsed = expected()[0]
    specs = ("killed.jsonl.gz",)
    async with serve(make_app()) as base:
        process = await start(endpoint, base, tmp_path, *specs)
        await kill_when(process, len(parsed) // 2, tmp_path)
        assert list((tmp_path / "state").rglob("spool/*")), "the spool is not in the state directory"
        if process.returncode == -signal.SIGKILL:
            assert not [name for name in object_names(endpoint) if name in specs]  # not visible before the end
        process = await start(endpoint, base, tmp_path, *specs)
        _, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-2000:]
    pages = pages_in(endpoint, "killed.jsonl.gz")
    assert len(pages) == len(set(pages)), "an item was written twice"
    assert set(pages) == parsed
    assert not [name for name in object_names(endpoint) if name.startswith("killed.") and gcs.PARTS in name]


def sink_for(key: str, spools: Path, **options: Any) -> tuple[GCSDestination, Any]:
    destination = GCSDestination(parse_spec(f"gs://items/{key}"), **options)
    return destination, destination.open(f"gs://items/{key}", spools / key)


async def test_parts_at_checkpoints_and_a_killed_run_resumed(endpoint: str, tmp_path: Path) -> None:
    destination, sink = sink_for("big.jsonl", tmp_path)
    chunk = os.urandom(PART_SIZE // 2)
    sink.write(chunk)
    assert (await sink.commit())["parts"] == []  # under PART_SIZE: kept in the spool
    sink.write(chunk)
    saved = await sink.commit()
    assert [part["name"] for part in saved["parts"]] == ["big.jsonl.eclaw-parts/00001"]
    sink.write(os.urandom(PART_SIZE))
    await sink.commit()  # a part sent after the checkpoint whose state is saved: the killed run's
    sink._fd = None  # the process dies here: nothing closed, nothing composed
    assert "big.jsonl" not in object_names(endpoint)
    again = destination.reopen("gs://items/big.jsonl", tmp_path / "big.jsonl")
    await again.resume(saved)
    again.write(b"tail")
    await again.finish()
    assert object_bytes(endpoint, "big.jsonl") == chunk + chunk + b"tail"
    assert not [name for name in object_names(endpoint) if name.startswith("big.jsonl.")]  # parts deleted


async def test_a_vanished_part_is_redone_from_the_spool(endpoint: str, tmp_path: Path) -> None:
    destination, sink = sink_for("redo.jsonl", tmp_path)
    data = os.urandom(PART_SIZE)
    sink.write(data)
    saved = await sink.commit()
    gcs_client(endpoint).bucket("items").blob(saved["parts"][0]["name"]).delete()  # a lifecycle rule, say
    again = destination.reopen("gs://items/redo.jsonl", tmp_path / "redo.jsonl")
    await again.resume(saved)
    await again.finish()
    assert object_bytes(endpoint, "redo.jsonl") == data


async def test_remove_takes_back_a_batch_begun_after_the_checkpoint(endpoint: str, tmp_path: Path) -> None:
    destination, sink = sink_for("batch-00002.jsonl", tmp_path)
    sink.write(os.urandom(PART_SIZE))
    await sink.commit()  # a part of a rotated batch, sent by a run killed before its next checkpoint
    assert destination.remove("gs://items/batch-00002.jsonl")
    assert not [name for name in object_names(endpoint) if name.startswith("batch-00002")]
    assert not destination.remove("gs://items/batch-00003.jsonl")


async def test_many_parts_are_composed_in_stages(
    endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, sink = sink_for("many.jsonl", tmp_path)
    monkeypatch.setattr(sink, "part_size", 1000)  # GCS composes objects of any size: 70 small parts
    chunks = [os.urandom(1000) for _ in range(70)]
    for chunk in chunks:
        sink.write(chunk)
        await sink.commit()
    assert len(sink._state()["parts"]) == 70
    await sink.finish()
    assert object_bytes(endpoint, "many.jsonl") == b"".join(chunks)
    assert object_names(endpoint).count("many.jsonl") == 1
    assert not [name for name in object_names(endpoint) if name.startswith("many.jsonl.")]


async def test_a_failed_commit_keeps_the_bytes_for_the_next(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    port = free_port()
    with gcs_emulator(port) as url:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        _, sink = sink_for("later.jsonl", tmp_path, retry_timeout=0.5)
        data = os.urandom(PART_SIZE)
        sink.write(data)
    saved = await sink.commit()  # the server is gone: one line, the bytes kept
    assert saved["parts"] == [] and saved["size"] == len(data)
    said = [r.getMessage() for r in caplog.records if r.name == "eclaw.outputs.spool"]
    assert len(said) == 1 and said[0].startswith(f"output gs://items/later.jsonl: cannot reach 127.0.0.1:{port}"), said
    with gcs_emulator(port) as url:  # back (the emulator's memory is empty: the bucket made again)
        await sink.commit()
        await sink.finish()
        assert object_bytes(url, "later.jsonl") == data


async def refused(tmp: Path, spec: str, environ: dict[str, str]) -> str:
    """The stderr of a crawl that must stop before it starts: one line, exit status 2."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eclaw", "crawl", SPIDER, "-a", "base_url=http://127.0.0.1:1", "-o", spec,
        "-s", "store=", cwd=tmp, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    said = stderr.decode()
    assert process.returncode == 2, said
    assert len(said.strip().splitlines()) == 1, said
    return said.strip()


def check_says(spec: str, extra: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The message of the ConfigError the check before a crawl raises for ``spec`` in the child's environment
    ``env(endpoint, **extra)``, in this process (what the CLI prints after ``eclaw: error:``)."""
    with monkeypatch.context() as patch:
        for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT"):
            patch.delenv(name, raising=False)
        for name, value in {"CLOUDSDK_CONFIG": "/nonexistent", "NO_GCE_CHECK": "true", **extra}.items():
            if value:
                patch.setenv(name, value)
            else:
                patch.delenv(name, raising=False)
        location = spec.split("?", 1)[0]
        with pytest.raises(ConfigError) as raised:
            GCSDestination(parse_spec(spec), retry_timeout=0.2).check(location)
    said = str(raised.value)
    assert len(said.splitlines()) == 1, said
    return said


async def test_bad_bucket_endpoint_or_credentials_is_one_line_and_exit_2(
    endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, closed = tmp_path / "key.json", f"http://127.0.0.1:{free_port()}"
    no_emulator = {"STORAGE_EMULATOR_HOST": ""}
    revoked = (
        f"gs://items/x.jsonl?endpoint={endpoint}",
        {**no_emulator, "GOOGLE_APPLICATION_CREDENTIALS": str(key)},
        "output gs://items/x.jsonl: the credentials were refused: invalid_grant",
    )  # a revoked service key
    cases = [
        ("gs://nosuch/x.jsonl", {}, "output gs://nosuch/x.jsonl: the bucket does not exist"),
        ("gs://items/x.jsonl", {"STORAGE_EMULATOR_HOST": closed},
         f"output gs://items/x.jsonl: cannot reach {closed.removeprefix('http://')}: Connection refused"),
        ("gs://items/x.jsonl", no_emulator, "output gs://items/x.jsonl: Your default credentials were not found"),
        ("gs://items/x.jsonl", {**no_emulator, "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/key.json"},
         "output gs://items/x.jsonl: File /nonexistent/key.json was not found"),
        revoked,
    ]  # fmt: skip
    with refusing_token_server() as token_uri:
        service_account_file(str(key), token_uri)
        line, said = await asyncio.gather(  # the CLI once (one line, exit 2); each case by the check it runs
            refused(tmp_path, revoked[0], env(endpoint, **revoked[1])),
            asyncio.to_thread(lambda: [check_says(spec, extra, monkeypatch) for spec, extra, _ in cases]),
        )
    for message, (_, _, expected_line) in zip(said, cases, strict=True):
        assert message.startswith(expected_line), message
        assert "PRIVATE KEY" not in message
    assert line.startswith(f"eclaw: error: {revoked[2]}"), line
    assert "PRIVATE KEY" not in line


def doc_commands() -> list[str]:
    """The ``eclaw crawl spiders/shop.py`` lines of the bash blocks of the GCS section of docs/destinations.md."""
    text = (ROOT / "docs" / "destinations.md").read_text(encoding="utf-8")
    section = text.split("## Google Cloud Storage", 1)[1].split("\n## ", 1)[0]
    lines = [line for block in re.findall(r"```bash\n(.*?)```", section, re.S) for line in block.splitlines()]
    return [line for line in lines if "eclaw crawl spiders/shop.py" in line]


async def test_the_commands_of_the_docs_run(endpoint: str, tmp_path: Path) -> None:
    commands = doc_commands()
    assert len(commands) >= 2
    shop = f"{sys.executable} -m eclaw crawl {ROOT / 'spiders' / 'shop.py'}"
    async with demo_site() as base:
        for k, command in enumerate(commands):
            line = re.sub(r"^STORAGE_EMULATOR_HOST=\S+ ", "", command).replace("eclaw crawl spiders/shop.py", shop)
            (tmp_path / str(k)).mkdir()
            process = await asyncio.create_subprocess_shell(
                f"{line} -a base_url={base} -s max_pages=40 -q", cwd=tmp_path / str(k), env=env(endpoint),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            _, stderr = await asyncio.wait_for(process.communicate(), 120)
            assert process.returncode == 0, f"{command}: {stderr.decode()[-1500:]}"
    rows = gzip.decompress(object_bytes(endpoint, "shop/items.jsonl.gz", bucket="my-bucket"))
    assert rows.count(b"\n") >= 1
