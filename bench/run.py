"""Side-by-side crawl benchmark: eclaw vs Scrapy vs a no-framework baseline
(and eclaw with ``--state``, and with ``--trace`` and ``--metrics-port``, for what they cost).

    python -m bench.run [--pages 20000] [--repeats 3] [--scaling 2000,20000,60000]
    python -m bench.run --contenders eclaw,eclaw@../old,baseline --scaling ''   # before/after a change
    python -m bench.run --contenders eclaw,eclaw-observed,eclaw-state,eclaw-nostore --scaling '' --no-micro
                                                       # what --trace/--metrics-port, --state and the store cost
                                                       # (eclaw-traced, eclaw-metrics: each of the first alone)

A contender ``eclaw@DIR`` is eclaw run from another checkout (a git worktree of an
earlier commit), in the same run: a change measured side by side with the code before it.

Each contender crawls the same local catalogue (see bench/site.py) in its own
process pinned to CPU 1 (the site's server is pinned to CPU 0), with
concurrency 64, writing JSONL. A run counts only if its items are complete
and correct. Contenders alternate within each repeat; the table quotes medians.
"""

from __future__ import annotations

import argparse
import compileall
import functools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.site import free_port, generate, product, serve, taskset

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / ".cache"
RESULTS = ROOT / "bench" / "results"
CONCURRENCY = 64


def command(name: str, base: str, out: Path) -> list[str]:
    if "@" in name:  # the same crawl, by the eclaw of another checkout (see env_for)
        return command(name.partition("@")[0], base, out)
    if name == "eclaw-nostore":  # the same crawl with the SQLite store (its run row, the quality profile) off
        return [*command("eclaw", base, out), "-s", "store="]
    if name == "eclaw-state":  # the same crawl, saving its state (checkpoints) as it goes
        state = CACHE / "state"
        shutil.rmtree(state, ignore_errors=True)
        return [*command("eclaw", base, out), "--state", str(state)]
    if name == "eclaw-observed":  # the same crawl with the event trace and the metrics endpoint on
        return [*command("eclaw", base, out), "--trace", str(CACHE / "trace.jsonl"), "--metrics-port", str(free_port())]
    if name == "eclaw-traced":  # the trace alone
        return [*command("eclaw", base, out), "--trace", str(CACHE / "trace.jsonl")]
    if name == "eclaw-metrics":  # the metrics endpoint alone
        return [*command("eclaw", base, out), "--metrics-port", str(free_port())]
    if name == "eclaw":
        return [
            sys.executable,
            "-m",
            "eclaw",
            "crawl",
            str(ROOT / "bench/contenders/eclaw_spider.py"),
            "-a",
            f"base_url={base}",
            "-o",
            str(out),
            "-s",
            f"concurrency={CONCURRENCY}",
            "-s",
            f"concurrency_per_domain={CONCURRENCY}",
            "--log-level",
            "WARNING",
        ]
    script = {"scrapy": "scrapy_spider.py", "baseline": "baseline.py"}[name]
    return [sys.executable, str(ROOT / "bench/contenders" / script), base, str(out), str(CONCURRENCY)]


@dataclass
class Run:
    contender: str
    pages: int
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu_seconds / self.pages


def env_for(name: str) -> dict[str, str] | None:
    """``eclaw@DIR`` (or ``eclaw-state@DIR``...) imports eclaw from DIR first (its own ``eclaw/middlewares``
    must resolve there). ``PYTHONSAFEPATH``: ``python -m`` would put the working directory (this
    checkout, when run from it) before ``PYTHONPATH``. Either checkout's bytecode is written first."""
    if "@" not in name:
        compiled(ROOT)
        return None
    checkout = Path(name.partition("@")[2]).resolve()
    if not (checkout / "eclaw" / "__init__.py").is_file():
        raise SystemExit(f"{name}: no eclaw checkout at {checkout}")
    compiled(checkout)
    return {**os.environ, "PYTHONPATH": str(checkout), "PYTHONSAFEPATH": "1"}


@functools.cache
def compiled(checkout: Path) -> None:
    """``checkout``'s eclaw with its bytecode written, so that no contender spends its run compiling: where
    ``PYTHONDONTWRITEBYTECODE`` is set, a fresh worktree would compile every module at every start-up
    (a second or so of CPU, counted in its figures)."""
    compileall.compile_dir(checkout / "eclaw", quiet=1)


def run_once(name: str, base: str, pages: int, out: Path) -> Run:
    out.unlink(missing_ok=True)
    started = time.perf_counter()
    process = subprocess.Popen(
        [*taskset(1), *command(name, base, out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env_for(name),
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    errors = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{name} failed (exit {process.returncode}):\n{errors[-2000:]}")
    check_complete(name, out, pages)
    return Run(name, pages, seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def check_complete(name: str, out: Path, pages: int) -> None:
    """Every page's item exactly once, with the right fields; else the run does not count."""
    check_items(name, out, [product(i) for i in range(pages)])


def check_items(name: str, out: Path, expected: list[dict[str, object]]) -> None:
    """Each of ``expected`` (told apart by ``sku``) in ``out`` exactly once and nothing else;
    else a ``SystemExit`` naming what is wrong, and the run does not count."""
    items = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    by_sku = {item["sku"]: item for item in items}
    problems = []
    if len(items) != len(expected):
        problems.append(f"{len(items)} items for {len(expected)} pages")
    if len(by_sku) != len(items):
        problems.append(f"{len(items) - len(by_sku)} duplicate items")
    missing = [str(item["sku"]) for item in expected if item["sku"] not in by_sku]
    if missing:
        problems.append(f"{len(missing)} pages missing ({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''})")
    wrong = next((item for item in expected if by_sku.get(item["sku"], item) != item), None)
    if wrong is not None:
        problems.append(f"{wrong['sku']}: expected {wrong}, got {by_sku[wrong['sku']]}")
    if problems:
        raise SystemExit(f"{name}: incomplete or wrong crawl: {'; '.join(problems)}")


def median_run(runs: list[Run]) -> dict[str, float]:
    return {
        "pages_per_s": statistics.median(r.pages_per_s for r in runs),
        "cpu_ms_per_page": statistics.median(r.cpu_ms_per_page for r in runs),
        "peak_rss_mb": statistics.median(r.peak_rss_mb for r in runs),
        "runs": len(runs),
    }


def compare(pages: int, repeats: int, contenders: list[str]) -> tuple[dict[str, dict[str, float]], list[Run], str]:
    site = generate(pages, CACHE)
    runs: list[Run] = []
    with serve(site) as (base, server):
        for repeat in range(repeats):
            for name in contenders:
                run = run_once(name, base, pages, CACHE / f"out-{name.replace('/', '_')}.jsonl")
                runs.append(run)
                print(
                    f"  [{repeat + 1}/{repeats}] {name:<8} {run.pages_per_s:8.0f} pages/s "
                    f"{run.cpu_ms_per_page:6.2f} CPU ms/page {run.peak_rss_mb:7.1f} MB",
                    flush=True,
                )
    medians = {name: median_run([r for r in runs if r.contender == name]) for name in contenders}
    return medians, runs, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scaling", default="2000,20000,60000", help="page counts for the scaling runs ('' = skip)")
    parser.add_argument("--contenders", default="eclaw,eclaw-state,eclaw-observed,scrapy,baseline")
    parser.add_argument("--micro", action=argparse.BooleanOptionalAction, default=True, help="the micro-benchmarks too")
    parser.add_argument("--out", default=str(RESULTS / "latest.json"), help="where to write the JSON report")
    args = parser.parse_args()
    contenders = args.contenders.split(",")
    CACHE.mkdir(parents=True, exist_ok=True)

    print(f"comparison at {args.pages} pages, {args.repeats} alternated repeats, concurrency {CONCURRENCY}")
    medians, runs, server = compare(args.pages, args.repeats, contenders)

    scaling: dict[str, dict[str, dict[str, float]]] = {}
    for pages in [int(p) for p in args.scaling.split(",") if p]:
        print(f"scaling at {pages} pages")
        largest = max(int(p) for p in args.scaling.split(","))
        names = [n for n in contenders if not n.startswith("eclaw-") and (n != "scrapy" or pages == largest)]
        scaling[str(pages)] = compare(pages, 1, names)[0]

    micro_results: dict[str, float] = {}
    if args.micro:
        print("micro-benchmarks (best of 3)")
        from bench.micro import main as micro

        micro_results = micro()

    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "server": server},
        "pages": args.pages,
        "repeats": args.repeats,
        "concurrency": CONCURRENCY,
        "medians": medians,
        "ratios": ratios(medians),
        "scaling": scaling,
        "micro": micro_results,
        "runs": [asdict(r) | {"pages_per_s": r.pages_per_s, "cpu_ms_per_page": r.cpu_ms_per_page} for r in runs],
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(table(report))
    print(f"\nwritten to {out}")


def ratios(medians: dict[str, dict[str, float]]) -> dict[str, float]:
    result = {}
    eclaw = medians.get("eclaw")
    for other in ("scrapy", "baseline"):
        if eclaw and other in medians:
            o = medians[other]
            result[f"eclaw/{other} pages_per_s"] = eclaw["pages_per_s"] / o["pages_per_s"]
            result[f"eclaw/{other} cpu_ms_per_page"] = eclaw["cpu_ms_per_page"] / o["cpu_ms_per_page"]
            result[f"eclaw/{other} peak_rss_mb"] = eclaw["peak_rss_mb"] / o["peak_rss_mb"]
    for name, variant in medians.items():  # a feature's cost: eclaw-observed, -state... against eclaw (same checkout)
        kind, at, checkout = name.partition("@")
        plain, key = medians.get("eclaw" + at + checkout), f"{name}/eclaw{at}{checkout}"
        if kind.startswith("eclaw-") and plain:
            result[f"{key} pages_per_s"] = variant["pages_per_s"] / plain["pages_per_s"]
            result[f"{key} cpu_ms_per_page"] = variant["cpu_ms_per_page"] / plain["cpu_ms_per_page"]
    return result


def table(report: dict) -> str:  # type: ignore[type-arg]
    lines = [
        f"{report['pages']} pages, median of {report['repeats']} alternated runs, "
        f"concurrency {report['concurrency']}, server {report['machine']['server']}",
        f"{'contender':<10} {'pages/s':>9} {'CPU ms/page':>12} {'peak RSS MB':>12}",
    ]
    for name, m in report["medians"].items():
        lines.append(f"{name:<10} {m['pages_per_s']:>9.0f} {m['cpu_ms_per_page']:>12.2f} {m['peak_rss_mb']:>12.1f}")
    for key, value in report["ratios"].items():
        lines.append(f"  {key:<32} {value:6.2f}x")
    if report.get("micro"):
        lines.append("micro-benchmarks (best of 3)")
        lines += [f"  {key:<28} {value:8.2f}" for key, value in report["micro"].items()]
    if report["scaling"]:
        lines.append("scaling (one run each)")
        lines.append(f"{'pages':>7} {'contender':<10} {'pages/s':>9} {'CPU ms/page':>12} {'peak RSS MB':>12}")
        for pages, medians in report["scaling"].items():
            for name, m in medians.items():
                lines.append(
                    f"{pages:>7} {name:<10} {m['pages_per_s']:>9.0f} {m['cpu_ms_per_page']:>12.2f} "
                    f"{m['peak_rss_mb']:>12.1f}"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
