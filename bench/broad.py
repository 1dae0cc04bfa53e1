"""Broad-crawl benchmark: eclaw vs Scrapy on thousands of hosts, each polite (download delay 2 s,
one connection per host), side by side in the same run.

    python -m bench.broad [--hosts 1000,10000] [--seconds 180] [--quick] [--profile]   (make bench-broad)

The site (bench/broad_site.py, one asyncio process pinned to CPU 0) answers as thousands of hosts
on loopback addresses, each with its own latency, some slow, some failing, some sending 429 with
Retry-After, a few large and a long tail of small ones, linked across hosts. Each contender runs
pinned to CPU 1 for ``--seconds`` (then gets SIGINT) on each configuration:

* ``single``: one host, no delay, no latency, concurrency 64: the contender's single-host rate;
* ``broad-N``: N hosts, the measured configurations;
* ``merged-N`` (``--merged N``): the pages of ``broad-N`` served as one host, no delay, no latency,
  concurrency 64: what the broad site's pages cost without its many hosts (``broad-N`` over it is
  the cost of the hosts alone);
* ``idle-N``: N hosts visited once each (chains of one-page hosts): memory per idle host.

Contenders: ``eclaw``, ``scrapy``, ``eclaw-p2``: eclaw with ``--processes 2``, on both CPUs (its
CPU counts both processes; its peak RSS is the parent's alone), ``eclaw-dns``: eclaw on a site
whose hosts are names (h{i}.broad.test), resolved with ``dns_resolver=async`` through a real
dnsmasq behind a relay answering in 20-200 ms (bench/names.py; the names of the hosts that reset
every connection do not exist), and ``baseline``: the floor, a hand-written aiohttp + lxml crawler
with the same politeness and nothing else (bench/contenders/broad_baseline.py).

Everything is measured from the site's request log (bench/broad_stats.py says how), so it is the
same for both contenders. Results go to bench/results/broad.json and a table at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import broad_stats as stats
from bench.broad_profile import sample, summarize
from bench.broad_site import Site, address, make_hosts
from bench.broad_site import name as host_name
from bench.names import name_server
from bench.run import env_for
from bench.site import free_port, taskset

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / ".cache" / "broad"
RESULTS = ROOT / "bench" / "results"
DNS_DELAY = (0.02, 0.2)  # eclaw-dns: each answer of the name server comes this late (seconds, uniform)
GRACE = 5.0  # seconds past the window before the stop signal: start-up is not in the window


@dataclass(frozen=True)
class Config:
    name: str
    mode: str
    hosts: int
    seconds: float
    delay: float
    per_domain: int
    concurrency: int
    pages: int = 0  # single mode: pages of the one host
    seed: int = 1
    retries: int = 2
    eclaw_settings: tuple[str, ...] = ()  # extra KEY=VALUE for eclaw (what-if runs)

    def site(self, port: int, *, names: bool = False) -> Site:
        return Site(self.mode, make_hosts(self.mode, self.hosts, self.seed, self.pages), port, names=names)


def names_of(site: Site) -> dict[str, str]:
    """What the name server answers for ``eclaw-dns``: every host's name, but those of the hosts that
    reset every connection (they give nothing anyway): NXDOMAIN, the crawl's DNS failures."""
    return {host_name(h.index): address(h.index) for h in site.hosts if h.fault != "reset"}


def kind(contender: str) -> str:
    """``eclaw@DIR`` (eclaw imported from the checkout DIR, to compare a change side by side) is an ``eclaw``."""
    return contender.partition("@")[0]


def crawler(contender: str, config: Config, seeds: Path, out: Path, dns_port: int = 0) -> list[str]:
    contender = kind(contender)
    if contender == "scrapy":
        script = str(ROOT / "bench/contenders/broad_scrapy.py")
        values = (config.concurrency, config.per_domain, config.delay, config.retries)
        return [sys.executable, script, str(seeds), str(out), *map(str, values)]
    if contender == "baseline":
        script = str(ROOT / "bench/contenders/broad_baseline.py")
        values = (config.concurrency, config.per_domain, config.delay)
        return [sys.executable, script, str(seeds), str(out), *map(str, values)]
    settings = {
        "concurrency": config.concurrency,
        "concurrency_per_domain": config.per_domain,
        "download_delay": config.delay,
        "retries": config.retries,
        "timeout": 15,
        "cookies": "false",
    }
    spider = str(ROOT / "bench/contenders/broad_eclaw.py")
    sets = [a for key, value in settings.items() for a in ("-s", f"{key}={value}")]
    sets += [a for pair in config.eclaw_settings for a in ("-s", pair)]
    if contender == "eclaw-dns":  # names, resolved through the bench's name server
        sets += ["-s", "dns_resolver=async", "-s", f"dns_servers=127.0.0.1:{dns_port}"]
    command = [sys.executable, "-m", "eclaw", "crawl", spider, "-a", f"seeds={seeds}", "-o", str(out), *sets, "-q"]
    return command + ["--processes", "2"] * (contender == "eclaw-p2")


def pinned(contender: str) -> list[str]:
    """One process crawls on CPU 1 (the site has CPU 0); ``eclaw-p2`` (``--processes 2``) on both."""
    return [] if kind(contender) == "eclaw-p2" else taskset(1)


def _peak_rss_mb(pid: int, known: float) -> float:
    """The process's peak RSS so far (VmHWM: its own, unlike ``ru_maxrss``, which a child
    inherits from the parent it was forked from)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return max(known, int(line.split()[1]) / 1024)
    return known


def _stop(pid: int, deadline: float) -> tuple[str, int | None, os.struct_rusage | None, float, float]:
    """Wait for ``pid`` until ``deadline``, then SIGINT (graceful), again, then SIGKILL; returns
    how it ended (with its exit code), its exit code (None if it never ended), its resource usage,
    the seconds the stop took and its peak RSS."""
    stopped_at, peak = 0.0, 0.0
    steps = ((None, 0.0), (signal.SIGINT, 15.0), (signal.SIGINT, 10.0), (signal.SIGKILL, 10.0))
    for signum, grace in steps:
        if signum is not None:
            os.kill(pid, signum)
            stopped_at = stopped_at or time.monotonic()
            deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            peak = _peak_rss_mb(pid, peak)
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                how = "finished" if signum is None else signal.Signals(signum).name
                code = os.waitstatus_to_exitcode(status)
                return f"{how}, exit {code}", code, usage, time.monotonic() - stopped_at if stopped_at else 0.0, peak
            time.sleep(0.1)
    return "lost", None, None, 0.0, peak


def run_one(contender: str, config: Config, profile: Path | None = None) -> dict[str, Any]:
    """One contender on one configuration: site up, crawl for the window, stop, read the log.
    With ``profile``, py-spy samples the crawler through the window into that file (raw format)."""
    work = CACHE / f"{config.name}-{contender}{'-profiled' if profile else ''}"
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    site = config.site(port, names=kind(contender) == "eclaw-dns")
    with contextlib.ExitStack() as stack:
        dns_port = stack.enter_context(name_server(names_of(site), DNS_DELAY)) if site.names else 0
        return _run(contender, config, site, work, dns_port, profile)


def _run(contender: str, config: Config, site: Site, work: Path, dns_port: int, profile: Path | None) -> dict[str, Any]:
    port = site.port
    seeds, out, log, errors = (work / n for n in ("seeds.txt", "items.jsonl", "site.log", "stderr.txt"))
    seeds.write_text("\n".join(site.seeds()) + "\n")
    out.unlink(missing_ok=True)
    server_args = ["--mode", config.mode, "--hosts", str(config.hosts), "--pages", str(config.pages)]
    server_args += ["--seed", str(config.seed), "--port", str(port), "--log", str(log)] + ["--names"] * site.names
    server = subprocess.Popen([*taskset(0), sys.executable, "-m", "bench.broad_site", *server_args], cwd=ROOT)
    try:
        _wait_listening(port, server)
        with errors.open("w") as err:
            started = time.monotonic()
            process = subprocess.Popen(
                [*pinned(contender), *crawler(contender, config, seeds, out, dns_port)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=work,
                env=env_for(contender),
            )
            spy = sample(process.pid, config.seconds, profile) if profile else None
            how, code, usage, shutdown, peak = _stop(process.pid, started + config.seconds + GRACE)
            process.returncode = code  # reaped by _stop
            if spy is not None:
                spy.wait()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait()
    records, lag = stats.read_log(log)
    if not records:
        raise SystemExit(f"{contender} on {config.name}: no request reached the site; see {errors}")
    return _measure(contender, config, site, records, out, usage, how, shutdown) | {
        "peak_rss_mb": round(peak, 1),
        "server_cpu_pct": round(100 * lag.get("cpu", 0.0) / max(lag.get("span", 0.0), 1e-9), 1),
        "server_lag_p99_ms": round(1000 * lag.get("lag_p99", 0.0), 1),
        "server_lag_max_ms": round(1000 * lag.get("lag_max", 0.0), 1),
        "connections": int(lag.get("connections", 0)),
    }


def _wait_listening(port: int, server: subprocess.Popen[bytes]) -> None:
    """Wait for the site on host 0's address (it refuses 127.0.0.1, which is no host of it)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit("the broad site exited at start")
        with contextlib.suppress(OSError), socket.create_connection((address(0), port), timeout=0.2):
            return
        time.sleep(0.05)
    raise SystemExit(f"the broad site did not listen on {port}")


def _measure(
    contender: str,
    config: Config,
    site: Site,
    records: list[stats.Record],
    out: Path,
    usage: os.struct_rusage | None,
    how: str,
    shutdown: float,
) -> dict[str, Any]:
    start, end = stats.window(records, config.seconds)
    seconds = end - start
    pages = stats.pages_between(records, start, end)
    served = sum(r.status == 200 for r in records)
    cpu = usage.ru_utime + usage.ru_stime if usage else float("nan")
    result: dict[str, Any] = {
        "config": config.name,
        "contender": contender,
        "stopped": how,
        "shutdown_s": round(shutdown, 1),
        "window_s": round(seconds, 1),
        "pages_in_window": pages,
        "pages_per_s": round(pages / seconds, 1),
        "requests": len(records),
        "pages_served": served,
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_page": round(1000 * cpu / max(served, 1), 3),
        "items": check_items(out, served),
    }
    if config.mode == "broad":
        bound = stats.ideal_pages(site.hosts, config.delay, seconds)
        loose = stats.ideal_pages(site.hosts, config.delay, seconds, loose=True)
        result["bound_pages_per_s"] = round(bound / seconds, 1)
        result["loose_bound_pages_per_s"] = round(loose / seconds, 1)
        result["of_bound"] = round(pages / bound, 3)
        waits = stats.waits(site, records, config.delay, start, end)
        polite = stats.politeness(records, site.hosts, config.delay, start, end)
        result["waits"] = {k: round(v, 3) for k, v in waits.items()}
        result["politeness"] = {k: round(v, 3) for k, v in polite.items()}
    return result


def check_items(out: Path, served: int) -> dict[str, Any]:
    """Items against the pages the site sent: right titles, no duplicates (a stopped crawl may
    miss the few it had in flight)."""
    from bench.broad_site import host_index, split_merged, title

    lines = out.read_text().splitlines() if out.exists() else []
    urls, wrong = set(), 0
    for line in lines:
        item = json.loads(line)
        netloc, _, path = item["url"].removeprefix("http://").partition("/")
        host = host_index(netloc.split(":")[0])
        merged = split_merged(f"/{path}".encode())
        if merged is not None:  # the merged site: /h/HOST/p/PAGE on one address
            host, path = merged[0], merged[1].decode()[1:]
        page = 0 if path == "" else int(path.removeprefix("p/"))
        wrong += host is None or item["title"] != title(host, page)
        urls.add(item["url"])
    return {"items": len(lines), "duplicates": len(lines) - len(urls), "wrong": wrong, "of_served": served}


def configs(args: argparse.Namespace) -> list[Config]:
    common = {"delay": args.delay, "per_domain": 1, "concurrency": args.concurrency, "seed": args.seed}
    common["eclaw_settings"] = tuple(args.eclaw_set)
    found = [Config("single", "single", 1, args.single_seconds, 0.0, 64, 64, pages=args.single_pages, seed=args.seed)]
    found = found if args.single_seconds else []
    found += [Config(f"broad-{n}", "broad", n, args.seconds, **common) for n in _ints(args.hosts)]
    found += [Config(f"idle-{n}", "idle", n, args.seconds, **common) for n in _ints(args.idle)]
    one = {"delay": 0.0, "per_domain": 64, "concurrency": 64}  # as the single host: no politeness, no latency
    found += [Config(f"merged-{n}", "merged", n, args.seconds, **(common | one)) for n in _ints(args.merged)]
    return found


def _ints(text: str) -> list[int]:
    return [int(n) for n in text.split(",") if n]


def summary(runs: list[dict[str, Any]], cfgs: list[Config]) -> dict[str, dict[str, Any]]:
    """Per contender: each configuration's figures against the targets."""
    result: dict[str, dict[str, Any]] = {}
    sizes = {c.name: c.hosts for c in cfgs}
    for contender in sorted({r["contender"] for r in runs}):
        mine = {name: _median(rs) for name, rs in _by_config(runs, contender).items()}
        single = mine.get("single")
        out: dict[str, Any] = {}
        for name, run in mine.items():
            if name.startswith("broad-"):
                row = {"of_bound": run["of_bound"], "max_wait_s": run["waits"]["max_s"]}
                merged = mine.get(name.replace("broad-", "merged-"))
                if merged:
                    row["of_merged"] = round(run["pages_per_s"] / merged["pages_per_s"], 3)
                if single:
                    row["of_single_host"] = round(run["pages_per_s"] / single["pages_per_s"], 3)
                    extra = 1024 * (run["peak_rss_mb"] - single["peak_rss_mb"]) / sizes[name]
                    row["rss_kb_per_host"] = round(extra, 2)
                out[name] = row
        idle = sorted((sizes[n], r["peak_rss_mb"]) for n, r in mine.items() if n.startswith("idle-"))
        if len(idle) >= 2:
            (small, low), (big, high) = idle[0], idle[-1]
            out["idle_kb_per_host"] = round(1024 * (high - low) / (big - small), 2)
        result[contender] = out
    return result


def _by_config(runs: list[dict[str, Any]], contender: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        if run["contender"] == contender:
            found.setdefault(run["config"], []).append(run)
    return found


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Of several rounds, the run of the median pages/s."""
    return sorted(runs, key=lambda r: r["pages_per_s"])[(len(runs) - 1) // 2]


def table(report: dict[str, Any]) -> str:
    head = f"{'config':<12} {'contender':<8} {'pages/s':>8} {'bound':>7} {'of bnd':>7} {'CPU ms/pg':>9} "
    head += f"{'RSS MB':>7} {'max wait':>8} {'p99 wait':>8} {'items':>7} {'srv CPU':>7} {'stop':>8}"
    lines = [head]
    for r in report["runs"]:
        waits = r.get("waits", {})
        lines.append(
            f"{r['config']:<12} {r['contender']:<8} {r['pages_per_s']:>8.1f} {r.get('bound_pages_per_s', 0):>7.1f} "
            f"{r.get('of_bound', 0):>7.1%} {r['cpu_ms_per_page']:>9.2f} {r['peak_rss_mb']:>7.1f} "
            f"{waits.get('max_s', 0):>7.2f}s {waits.get('p99_s', 0):>7.2f}s {r['items']['items']:>7} "
            f"{r['server_cpu_pct']:>6.1f}% {r['stopped']:>8}"
        )
    lines.append("targets: >= 90% of the bound at 1,000 hosts, >= 90% of single-host at 10,000, < 1 KB/idle host")
    for contender, rows in report["summary"].items():
        lines.append(f"  {contender}: {json.dumps(rows)}")
    return "\n".join(lines)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", default="1000,10000", help="host counts of the broad configurations")
    parser.add_argument("--idle", default="1000,10000", help="host counts of the idle-host memory probe ('' = skip)")
    parser.add_argument("--merged", default="", help="host counts whose pages to serve as one host too ('' = none)")
    parser.add_argument("--seconds", type=float, default=180.0, help="window of each broad/idle run")
    parser.add_argument("--single-pages", type=int, default=50000)
    parser.add_argument("--single-seconds", type=float, default=60.0, help="0 skips the single-host runs")
    parser.add_argument("--delay", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--contenders", default="eclaw,scrapy")
    parser.add_argument("--eclaw-set", action="append", default=[], metavar="KEY=VALUE", help="an eclaw setting")
    parser.add_argument("--quick", action="store_true", help="100 and 1,000 hosts, 40 s windows: a few minutes")
    parser.add_argument("--rounds", type=int, default=1, help="each configuration's contenders N times, alternated")
    parser.add_argument(
        "--profile", action="store_true", help="then py-spy eclaw (and the floor if a contender): one host, most hosts"
    )
    parser.add_argument("--out", default=str(RESULTS / "broad.json"))
    args = parser.parse_args()
    if args.quick:
        args.hosts, args.idle, args.seconds = "100,1000", "200,2000", 40.0
        args.single_pages, args.single_seconds = 10000, 20.0
    try:
        counts = _ints(args.hosts) + _ints(args.idle) + _ints(args.merged)
    except ValueError as exc:
        parser.error(f"--hosts, --idle and --merged take host counts separated by commas: {exc}")
    if any(n < 1 for n in counts) or args.seconds <= 0 or args.delay < 0 or args.concurrency < 1:
        parser.error("host counts, --seconds and --concurrency must be positive, --delay not negative")
    known = {"eclaw", "eclaw-p2", "eclaw-dns", "scrapy", "baseline"}
    if unknown := {kind(c) for c in args.contenders.split(",")} - known:
        parser.error(f"unknown contender(s) {', '.join(sorted(unknown))}: eclaw, eclaw-p2, eclaw-dns, scrapy, baseline")
    return args


def _raise_open_files() -> None:
    """Each of 10,000 hosts holds a connection in the crawler and in the site: lift the soft limit
    on open files to the hard one (the processes started here inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 65536 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def main() -> None:
    args = _arguments()
    _raise_open_files()
    cfgs = configs(args)
    runs = []
    load_before = os.getloadavg()
    contenders = args.contenders.split(",")
    for config in cfgs:
        for contender in alternated(contenders, args.rounds):
            print(f"{config.name}: {contender} ...", flush=True)
            runs.append(run_one(contender, config))
            print(f"  {json.dumps(runs[-1])}", flush=True)
    report: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_before": load_before},
        "configs": [asdict(c) for c in cfgs],
        "sizes": {c.name: _sizes(c) for c in cfgs},
        "runs": runs,
        "summary": summary(runs, cfgs),
    }
    if args.profile:
        report["profiles"] = profiles(cfgs, floor="baseline" in contenders)
    report["machine"]["load_after"] = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(table(report))
    print(f"\nwritten to {out}")


def profiles(cfgs: list[Config], *, floor: bool = False) -> dict[str, dict[str, Any]]:
    """eclaw again under py-spy on the single host and on the broad configuration of the most hosts:
    where a page's CPU goes at both ends of the scale; with ``floor``, the floor too (``NAME floor``),
    the same groups side by side."""
    broad = [c for c in cfgs if c.mode == "broad"]
    chosen = [c for c in cfgs if c.mode == "single"] + ([max(broad, key=lambda c: c.hosts)] if broad else [])
    found = {}
    for config in chosen:
        for contender, name in [("eclaw", config.name)] + [("baseline", f"{config.name} floor")] * floor:
            raw = CACHE / f"profile-{name.replace(' ', '-')}.txt"
            print(f"{name}: {contender} under py-spy ...", flush=True)
            found[name] = {"run": run_one(contender, config, raw), **summarize(raw)}
    return found


def alternated(contenders: list[str], rounds: int) -> list[str]:
    """Each contender once a round, the order reversed every other round: none always runs first."""
    return [c for n in range(rounds) for c in (contenders if n % 2 == 0 else contenders[::-1])]


def _sizes(config: Config) -> dict[str, int]:
    hosts = config.site(0).hosts
    return {
        "hosts": len(hosts),
        "pages": sum(h.pages for h in hosts if h.healthy),
        "large": sum(h.pages >= 1000 for h in hosts),
        "medium": sum(100 <= h.pages < 1000 for h in hosts),
        "slow": sum(h.latency >= 3 for h in hosts),
        "faulty": sum(not h.healthy for h in hosts),
        "throttling": sum(h.fault == "429" for h in hosts),
    }


if __name__ == "__main__":
    main()
