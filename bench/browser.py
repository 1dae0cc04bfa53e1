"""Rendered pages: eclaw's browser fetcher vs Crawlee's PlaywrightCrawler, on one local JavaScript site.

    make bench-browser                  (installs Crawlee into bench/.cache/crawlee, then runs this)
    python -m bench.browser [--pages 2000] [--repeats 2] [--concurrency 4] [--contenders eclaw,crawlee]

The site (bench/browser_site.py, in its own process) has ``--pages`` pages whose items,
links and pagination exist only once their script ran. Each contender crawls all of it
from ``/list/0`` with the system's Chromium, ``--concurrency`` pages open at once and
images and fonts blocked: eclaw with ``fetcher = "browser"`` (bench/contenders/
eclaw_browser_spider.py, ``eclaw crawl``), Crawlee 3 with a ``PlaywrightCrawler``
(bench/contenders/crawlee/crawl.cjs). A run counts only if every page's item is there
exactly once and no image or font reached the server.

Per run: pages/s (wall clock, start-up and shut-down included); the CPU seconds of the
crawler's whole process tree, Chromium's processes included (bench/proctree.py); the
tree's PSS sampled every 0.5 s: its peak, and its median over the 100 pages before page
``pages / 4`` and over the last 100 pages (page N / 4 vs page N: memory flatness, target
within 10 %). Contenders alternate (A B, B A, ...); the table quotes medians. Results go
to bench/results/browser.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.browser_site import expected_items
from bench.proctree import TreeRun, become_subreaper, run_tree
from bench.run import CACHE, RESULTS, ROOT, check_items
from bench.site import app_process
from eclaw.fetchers.browser.fetcher import find_chromium

CRAWLEE = CACHE / "crawlee"  # make bench-browser npm-installs bench/contenders/crawlee/package.json here
MIB = 1024 * 1024
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    contender: str
    pages: int
    seconds: float
    cpu_seconds: float
    peak_pss_mb: float
    early_pss_mb: float | None  # median over the 100 pages before page N / 4
    late_pss_mb: float | None  # median over the last 100 pages
    others_cpus: float  # CPUs kept busy meanwhile by everything but the crawler's tree (the noise)
    samples: list[tuple[float, int, int]] = field(repr=False)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu_seconds / self.pages

    @property
    def growth(self) -> float | None:
        """Memory at the last page over memory at page N / 4, less one."""
        if self.early_pss_mb is None or self.late_pss_mb is None:
            return None
        return self.late_pss_mb / self.early_pss_mb - 1


def command(name: str, base: str, out: Path, concurrency: int, chromium: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of contender ``name``."""
    if name == "eclaw":
        argv = [sys.executable, "-m", "eclaw", "crawl", str(ROOT / "bench/contenders/eclaw_browser_spider.py")]
        argv += ["-a", f"base_url={base}", "-o", str(out), "--log-level", "WARNING"]
        for setting in ("concurrency", "concurrency_per_domain", "browser_pages"):
            argv += ["-s", f"{setting}={concurrency}"]
        return [*argv, "-s", f"browser_executable={chromium}"], dict(os.environ)
    if name == "crawlee":
        if not (CRAWLEE / "node_modules" / "crawlee").is_dir():
            raise SystemExit(f"Crawlee is not installed in {CRAWLEE}: run `make bench-browser` (it npm-installs it)")
        script = ROOT / "bench/contenders/crawlee/crawl.cjs"
        env = {**os.environ, "NODE_PATH": str(CRAWLEE / "node_modules")}
        return ["node", str(script), base, str(out), str(concurrency), chromium], env
    raise SystemExit(f"unknown contender {name!r} (known: eclaw, crawlee)")


def site_stats(base: str) -> dict[str, int]:
    """What the site has served so far: documents, API calls (pages rendered), images, fonts."""
    with urllib.request.urlopen(f"{base}/stats", timeout=10) as answer:
        stats: dict[str, int] = json.load(answer)
    return stats


def run_once(name: str, base: str, pages: int, concurrency: int, chromium: str, work: Path = CACHE) -> Run:
    """One crawl of the whole site by ``name``, measured; a ``SystemExit`` if it does not count."""
    folder = work / f"browser-{name}"  # the crawl's working directory: its store, Crawlee's storage
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    out = folder / "items.jsonl"
    argv, env = command(name, base, out, concurrency, chromium)
    before, busy = site_stats(base), machine_busy()
    tree = run_tree(argv, progress=lambda: site_stats(base)["api"] - before["api"], env=env, cwd=folder)
    others = (machine_busy() - busy - tree.cpu_seconds) / tree.seconds
    if tree.returncode != 0:
        raise SystemExit(f"{name} failed (exit {tree.returncode}):\n{tree.stderr[-2000:]}")
    check_items(name, out, expected_items(pages))
    served = site_stats(base)
    fetched = {kind: served[kind] - before[kind] for kind in ("images", "fonts")}
    if any(fetched.values()):
        raise SystemExit(f"{name}: images and fonts are to be blocked, but the site served {fetched}")
    return measured(name, pages, tree, others)


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy since it booted."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = Path("/proc/stat").read_text().split()[1:9]
    return sum(int(n) for n in (user, nice, system, irq, softirq, steal)) / TICKS


def measured(name: str, pages: int, tree: TreeRun, others: float) -> Run:
    """A run's numbers from its tree's samples."""
    width = min(100, max(1, pages // 10))
    peak = max((pss for _, _, pss in tree.samples), default=0)
    return Run(
        contender=name,
        pages=pages,
        seconds=tree.seconds,
        cpu_seconds=tree.cpu_seconds,
        peak_pss_mb=peak / MIB,
        early_pss_mb=memory_at(tree.samples, pages // 4, width),
        late_pss_mb=memory_at(tree.samples, pages, width),
        others_cpus=max(0.0, others),
        samples=tree.samples,
    )


def memory_at(samples: list[tuple[float, int, int]], page: int, width: int) -> float | None:
    """Median PSS (MB) of the samples taken while pages ``page - width`` to ``page - 1`` rendered."""
    window = [pss for _, done, pss in samples if page - width <= done < page]
    return statistics.median(window) / MIB if window else None


def compare(pages: int, repeats: int, concurrency: int, contenders: list[str]) -> list[Run]:
    """Every contender ``repeats`` times, alternating, on one site of ``pages`` pages."""
    chromium = find_chromium("")
    runs: list[Run] = []
    with app_process("bench.browser_site", "--pages", str(pages)) as base:
        for repeat in range(repeats):
            for name in contenders if repeat % 2 == 0 else contenders[::-1]:
                run = run_once(name, base, pages, concurrency, chromium)
                runs.append(run)
                print(
                    f"  [{repeat + 1}/{repeats}] {name:<8} {run.pages_per_s:6.1f} pages/s {run.cpu_seconds:7.1f} CPU s "
                    f"peak {run.peak_pss_mb:6.0f} MB, {_mb(run.early_pss_mb)} -> {_mb(run.late_pss_mb)} MB "
                    f"({_percent(run.growth)}), others busy {run.others_cpus:.1f} CPUs",
                    flush=True,
                )
    return runs


def medians(runs: list[Run], contenders: list[str]) -> dict[str, dict[str, float | None]]:
    keys = ("pages_per_s", "cpu_seconds", "cpu_ms_per_page", "peak_pss_mb", "early_pss_mb", "late_pss_mb", "growth",
            "others_cpus")  # fmt: skip
    result: dict[str, dict[str, float | None]] = {}
    for name in contenders:
        mine = [run for run in runs if run.contender == name]
        values = {key: [v for v in (getattr(run, key) for run in mine) if v is not None] for key in keys}
        result[name] = {key: statistics.median(v) if v else None for key, v in values.items()}
    return result


def table(report: dict) -> str:  # type: ignore[type-arg]
    pages = report["pages"]
    lines = [
        f"| {pages:,} rendered pages, median of {report['repeats']} | pages/s | CPU s (tree) | CPU ms/page "
        f"| peak PSS MB | PSS at page {pages // 4:,} | PSS at page {pages:,} | growth |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in report["medians"].items():
        lines.append(
            f"| {name} | {m['pages_per_s']:.1f} | {m['cpu_seconds']:.0f} | {m['cpu_ms_per_page']:.0f} "
            f"| {m['peak_pss_mb']:.0f} | {_mb(m['early_pss_mb'])} | {_mb(m['late_pss_mb'])} | {_percent(m['growth'])} |"
        )
    return "\n".join(lines)


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f} %"


def versions(contenders: list[str]) -> dict[str, str]:
    """The programs measured, for the report."""
    found = {"python": platform.python_version()}
    found["chromium"] = subprocess.run([find_chromium(""), "--version"], capture_output=True, text=True).stdout.strip()
    if "crawlee" in contenders:
        found["node"] = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
        for package in ("crawlee", "playwright"):
            manifest = CRAWLEE / "node_modules" / package / "package.json"
            found[package] = json.loads(manifest.read_text())["version"] if manifest.exists() else "?"
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4, help="pages open at once")
    parser.add_argument("--contenders", default="eclaw,crawlee")
    parser.add_argument("--out", default=str(RESULTS / "browser.json"), help="where to write the JSON report")
    args = parser.parse_args()
    contenders = args.contenders.split(",")
    if args.pages < 1 or args.repeats < 1 or args.concurrency < 1:
        raise SystemExit("--pages, --repeats and --concurrency must be positive")
    become_subreaper()  # Chromium's orphans come here to be waited for, their CPU counted
    print(f"{args.pages} rendered pages, {args.repeats} alternated repeats, {args.concurrency} pages open at once")
    started_load = os.getloadavg()
    runs = compare(args.pages, args.repeats, args.concurrency, contenders)
    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "load_before": started_load, "load_after": os.getloadavg()},
        "versions": versions(contenders),
        "pages": args.pages,
        "repeats": args.repeats,
        "concurrency": args.concurrency,
        "medians": medians(runs, contenders),
        "runs": [asdict(run) | {"pages_per_s": run.pages_per_s, "growth": run.growth} for run in runs],
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print()
    print(table(report))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
