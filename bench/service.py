"""Service benchmark: ``eclaw serve`` under many schedules, with a ``kill -9`` of the service mid-run.

    python -m bench.service [--quick] [--schedules 20] [--minutes 10] [--max-jobs 4]

Full run: ``--schedules`` schedules ``* * * * *`` (every minute) for ``--minutes`` minutes, 4 crawls at
once, each a short crawl of a local site. ``--quick``: six-field cron every 10 seconds for 60 seconds.
All the while a client calls ``GET /api/jobs`` and ``GET /api/health`` (latencies: p50/p99). Halfway
the service is killed with SIGKILL and started again at once. At the end, per schedule, the slots
due in the window (croniter) are compared with the slots fired (the SQLite ``slots`` table) and the
jobs run: no slot missed or doubled, no job lost (every job ends ``finished``) or run twice. Also the
idle RSS of the service (before any schedule). Results also go to bench/results/service.json.
"""

from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from croniter import croniter

from tests.service.helpers import Service, site, wait_for, write_project


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _load(service: Service, stop: threading.Event, latencies: list[float]) -> None:
    while not stop.is_set():
        for path in ("/api/jobs?limit=50", "/api/health"):
            start = time.perf_counter()
            try:
                service.call("GET", path)
            except OSError:
                continue  # the service is down (the kill -9): not a latency
            latencies.append((time.perf_counter() - start) * 1000)
        stop.wait(0.05)


def run(quick: bool, schedules: int, minutes: float, max_jobs: int) -> dict[str, Any]:
    """One run; returns the measures."""
    cron, seconds = ("* * * * * */10", 60.0) if quick else ("* * * * *", minutes * 60)
    root = Path(tempfile.mkdtemp(prefix="bench-service-"))
    project = write_project(root / "project")
    with site(delay=0.05) as base:
        service = Service(project, "--max-jobs", str(max_jobs), "--keep-jobs", "1000000").start()
        assert service.process is not None
        time.sleep(2)  # settle before the idle RSS
        idle = _rss_mb(service.process.pid)
        begin = time.time()
        for _ in range(schedules):
            service.call("POST", "/api/schedules", {"spider": "slow", "cron": cron,
                                                    "args": {"start_urls": f"{base}/?count=5"}})  # fmt: skip
        latencies: list[float] = []
        stop = threading.Event()
        load = threading.Thread(target=_load, args=(service, stop, latencies))
        load.start()
        time.sleep(seconds / 2)
        service.stop(signal.SIGKILL)
        killed = time.time()
        service.start()
        time.sleep(max(0.0, begin + seconds - time.time()))
        end = time.time()
        windows = []  # each schedule's (created, disabled): its slots are due in between
        for record in service.call("GET", "/api/schedules")[1]["schedules"]:
            service.call("PATCH", f"/api/schedules/{record['id']}", {"enabled": False})
            windows.append((record["created"], time.time()))
        stop.set()
        load.join()
        wait_for(lambda: not service.call("GET", "/api/jobs?state=queued")[1]["jobs"]
                 and not service.call("GET", "/api/jobs?state=running")[1]["jobs"], 600, "the last jobs")  # fmt: skip
        service.stop()
    db = sqlite3.connect(project / ".eclaw-serve" / "service.db")
    fired = db.execute("SELECT schedule_id, slot, job_id FROM slots").fetchall()
    jobs = [{"state": row[0]} for row in db.execute("SELECT state FROM jobs")]
    expected = sum(_expected(cron, created, disabled) for created, disabled in windows)
    doubled = len(fired) - len({job_id for _, _, job_id in fired})  # slots that share a job
    states: dict[str, int] = {}
    for job in jobs:
        states[job["state"]] = states.get(job["state"], 0) + 1
    ordered = sorted(latencies)
    return {
        "mode": "quick" if quick else "full", "cron": cron, "schedules": schedules, "seconds": round(end - begin),
        "max_jobs": max_jobs, "slots_expected": expected, "slots_fired": len(fired), "jobs": len(jobs),
        "job_states": states, "slots_sharing_a_job": doubled, "killed_at": round(killed - begin, 1),
        "api_calls": len(ordered), "api_p50_ms": round(ordered[len(ordered) // 2], 1),
        "api_p99_ms": round(ordered[int(len(ordered) * 0.99)], 1), "idle_rss_mb": round(idle, 1),
    }  # fmt: skip


def _expected(cron: str, begin: float, end: float) -> int:
    it, count = croniter(cron, datetime.fromtimestamp(begin, UTC)), 0
    while it.get_next(float) <= end:
        count += 1
    return count


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--schedules", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--max-jobs", type=int, default=4)
    args = parser.parse_args()
    result = run(args.quick, args.schedules, args.minutes, args.max_jobs)
    print(json.dumps(result, indent=2))
    out = Path(__file__).parent / "results" / "service.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    sys.exit(0 if result["slots_fired"] == result["slots_expected"] == result["jobs"] else 1)


if __name__ == "__main__":
    main()
