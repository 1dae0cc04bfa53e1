"""Flows: validation, order, concurrency, retries, timeouts, failure propagation, idempotent runs, logs."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from eclaw import Response, Spider
from eclaw.cli.flow import load_flow
from eclaw.flows import Context, Flow, FlowError, Items, TaskFailed
from tests.inprocess import eclaw_inprocess

ROOT = Path(__file__).resolve().parent.parent


async def run(flow: Flow, tmp: Path, key: str = "k1", **options: Any) -> dict[str, Any]:
    return await flow.run(key, store=tmp / "flows.sqlite", data_dir=tmp / "data", **options)


def states(records: dict[str, Any]) -> dict[str, str]:
    return {name: record.state for name, record in records.items()}


# -- validation --------------------------------------------------------------------------


def test_cycle_is_rejected_naming_its_tasks() -> None:
    flow = Flow("f")
    flow.add(lambda: 1, name="a", after=["c"])
    flow.add(lambda: 1, name="b", after=["a"])
    flow.add(lambda: 1, name="c", after=["b"])
    flow.add(lambda: 1, name="d", after=["a"])
    with pytest.raises(FlowError, match=r"flow 'f' has a cycle: a -> b -> c -> a"):
        flow.order()


@pytest.mark.parametrize(
    ("deps", "message"),
    [
        ({"a": ["zz"]}, r"task 'a' depends on unknown task 'zz'"),
        ({"a": ["a"]}, r"task 'a' depends on itself"),
    ],
)
def test_unknown_and_self_dependencies_are_rejected(deps: dict[str, list[str]], message: str) -> None:
    flow = Flow("f")
    for name, after in deps.items():
        flow.add(lambda: 1, name=name, after=after)
    with pytest.raises(FlowError, match=message):
        flow.order()


def test_duplicate_task_names_are_rejected() -> None:
    flow = Flow("f")
    flow.add(lambda: 1, name="a")
    with pytest.raises(FlowError, match=r"task 'a' is defined twice"):
        flow.add(lambda: 2, name="a")


async def test_nothing_runs_when_the_graph_is_bad(tmp_path: Path) -> None:
    ran = []
    flow = Flow("f")
    flow.add(lambda: ran.append(1), name="ok")
    flow.add(lambda: 1, name="bad", after=["missing"])
    with pytest.raises(FlowError):
        await run(flow, tmp_path)
    assert ran == []


# -- running -----------------------------------------------------------------------------


async def test_a_task_starts_only_after_all_its_dependencies_succeeded(tmp_path: Path) -> None:
    events: list[str] = []
    flow = Flow("order", concurrency=4)

    def step(name: str, delay: float) -> Any:
        async def task(ctx: Context) -> str:
            events.append(f"start {name}")
            await asyncio.sleep(delay)
            events.append(f"end {name}")
            return name

        return task

    flow.add(step("a", 0.05), name="a")
    flow.add(step("b", 0.01), name="b")
    flow.add(step("c", 0.0), name="c", after=["a", "b"])
    flow.add(step("d", 0.0), name="d", after=["c"])
    records = await run(flow, tmp_path)
    assert set(states(records).values()) == {"success"}
    for task, deps in {"c": "ab", "d": "c"}.items():
        for dep in deps:
            assert events.index(f"end {dep}") < events.index(f"start {task}")


async def test_independent_branches_run_concurrently_within_the_limit(tmp_path: Path) -> None:
    running, peak = 0, 0

    async def work() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1

    for limit in (3, 1):
        running = peak = 0
        flow = Flow("wide", concurrency=limit)
        for n in range(6):
            flow.add(work, name=f"t{n}")
        records = await run(flow, tmp_path, key=f"limit{limit}")
        assert set(states(records).values()) == {"success"}
        assert peak == limit


async def test_retries_back_off_exponentially(tmp_path: Path) -> None:
    waits: list[float] = []
    attempts = 0

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    flow = Flow("retry")

    @flow.task(retries=3, retry_delay=0.5, backoff=2.0)
    def flaky() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 4:
            raise ConnectionError(f"try {attempts}")
        return "ok"

    records = await run(flow, tmp_path, sleep=fake_sleep)
    assert records["flaky"].state == "success" and records["flaky"].attempts == 4
    assert waits == [0.5, 1.0, 2.0]


async def test_per_task_and_whole_flow_timeouts(tmp_path: Path) -> None:
    flow = Flow("slow")

    async def slow() -> None:
        await asyncio.sleep(10)

    flow.add(slow, timeout=0.05, retries=1, retry_delay=0)
    records = await run(flow, tmp_path)
    assert records["slow"].state == "failed" and records["slow"].attempts == 2
    assert records["slow"].error == "timed out after 0.05s"

    whole = Flow("whole", timeout=0.1)
    whole.add(slow, name="first")
    whole.add(slow, name="second", after=["first"])
    records = await run(whole, tmp_path)
    assert states(records) == {"first": "failed", "second": "failed"}
    assert records["first"].error == records["second"].error == "flow timed out"


async def test_a_final_failure_marks_downstream_upstream_failed_and_other_branches_finish(tmp_path: Path) -> None:
    flow = Flow("branches")

    def broken() -> None:
        raise TaskFailed("source is down")

    flow.add(broken, name="bad")
    flow.add(lambda: 1, name="after_bad", after=["bad"])
    flow.add(lambda: 2, name="after_after", after=["after_bad"])
    flow.add(lambda: 3, name="good")
    flow.add(lambda ctx: ctx["good"] + 1, name="after_good", after=["good"])
    flow.add(lambda: 4, name="never", after=["good"], run_if=lambda ctx: ctx["good"] > 10)
    flow.add(lambda: 5, name="after_skipped", after=["never"])
    records = await run(flow, tmp_path)
    assert states(records) == {
        "bad": "failed",
        "after_bad": "upstream_failed",
        "after_after": "upstream_failed",
        "good": "success",
        "after_good": "success",
        "never": "skipped",
        "after_skipped": "skipped",
    }
    assert records["bad"].error == "TaskFailed: source is down"
    assert json.loads(records["after_good"].result) == 4


async def test_rerun_of_a_key_skips_what_succeeded_force_reruns_downstream_other_keys_are_separate(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    fail = {"c": True}

    def make(name: str) -> Any:
        def task(ctx: Context) -> dict[str, Any]:
            calls.append(name)
            if fail.get(name):
                raise RuntimeError(f"{name} injected failure")
            return {"name": name, "inputs": sorted(ctx)}

        return task

    flow = Flow("idem")
    flow.add(make("a"), name="a")
    flow.add(make("b"), name="b", after=["a"])
    flow.add(make("c"), name="c", after=["b"])
    flow.add(make("d"), name="d", after=["c"])

    first = await run(flow, tmp_path)
    assert states(first) == {"a": "success", "b": "success", "c": "failed", "d": "upstream_failed"}
    fail["c"] = False
    calls.clear()
    second = await run(flow, tmp_path)
    assert calls == ["c", "d"]  # a and b succeeded for this key: not run again, their results read back
    assert set(states(second).values()) == {"success"} and second["a"].cached
    assert json.loads(second["d"].result) == {"name": "d", "inputs": ["c"]}

    calls.clear()
    await run(flow, tmp_path, force=["b"])
    assert calls == ["b", "c", "d"]
    calls.clear()
    await run(flow, tmp_path, key="k2")  # another key starts from nothing
    assert calls == ["a", "b", "c", "d"]
    with pytest.raises(FlowError, match=r"--force names unknown task 'zz'"):
        await run(flow, tmp_path, force=["zz"])


async def test_log_file_lines_carry_run_task_attempt_and_one_traceback(tmp_path: Path) -> None:
    flow = Flow("logs")

    def boom() -> None:
        raise ValueError("deep problem")

    flow.add(boom, retries=2, retry_delay=0)
    await run(flow, tmp_path)
    [log] = (tmp_path / "data" / "logs").glob("logs-k1-*.log")
    text = log.read_text()
    assert re.search(r"run=1 task=boom attempt=1 attempt failed: ValueError: deep problem; retrying", text)
    assert re.search(r"run=1 task=boom attempt=3 failed after 3 attempt\(s\): ValueError: deep problem", text)
    assert text.count("Traceback (most recent call last)") == 1


# -- spiders in flows, the example, the CLI ----------------------------------------------


async def test_a_spider_task_reads_its_start_urls_from_an_upstream_result(tmp_path: Path, demo_url: str) -> None:
    class Titles(Spider):
        name = "titles"

        def parse(self, response: Response) -> Any:
            yield {"url": response.url, "title": response.css("title::text").get()}

    flow = Flow("spiders")
    flow.add(lambda ctx: [f"{ctx.params['base']}/about", f"{ctx.params['base']}/"], name="pick")
    flow.add(Titles, after=["pick"], start_urls=lambda ctx: ctx["pick"])
    flow.add(lambda ctx: len(ctx["titles"]), name="count", after=["titles"])
    records = await run(flow, tmp_path, params={"base": demo_url})
    assert set(states(records).values()) == {"success"}
    assert json.loads(records["count"].result) == 2
    items = Items(json.loads(records["titles"].result)["$items"])
    assert sorted(item["url"] for item in items) == [f"{demo_url}/", f"{demo_url}/about"]


async def test_example_shop_flow_end_to_end(tmp_path: Path, demo_url: str) -> None:
    flow = load_flow(str(ROOT / "spiders/shop_flow.py"))
    records = await run(flow, tmp_path, params={"base_url": demo_url})
    assert set(states(records).values()) == {"success"}, {n: r.error for n, r in records.items()}
    assert json.loads(records["quality_check"].result) == {"products": 500, "categories": 10}


async def test_cli_show_run_status_and_backfill(tmp_path: Path, demo_url: str) -> None:
    async def eclaw(*args: str) -> tuple[int, str, str]:
        return await eclaw_inprocess("flow", *args)  # in tmp_path, the test's working directory

    flow_file = str(ROOT / "spiders/shop_flow.py")
    code, out, _ = await eclaw("show", flow_file)
    assert code == 0 and "└── categories [spider]" in out
    assert '"clean" -> "quality_check";' in (await eclaw("show", flow_file, "--dot"))[1]
    code, out, err = await eclaw("run", flow_file, "-a", f"base_url={demo_url}", "--backfill", "2026-11-01..2026-11-02")
    assert code == 0, err[-2000:]
    assert "run key 2026-11-01" in out and "run key 2026-11-02" in out
    _, out, err = await eclaw("run", flow_file, "-a", f"base_url={demo_url}", "--run-key", "2026-11-02")
    assert out.count("succeeded earlier, not run again") == 5
    assert "skipped: succeeded in an earlier run of key 2026-11-02" in err
    _, out, _ = await eclaw("status", flow_file, "--run-key", "2026-11-01")
    assert re.search(r"quality_check\s+success\s+1", out)
    code, _, err = await eclaw("run", flow_file, "--backfill", "2026-11-05..2026-11-01")
    assert code == 2 and err.strip().count("\n") == 0 and "range is empty" in err
