"""Jobs: each crawl runs in its own process (``python -m eclaw crawl``), at most ``max_jobs`` at once,
the rest wait in a FIFO queue (the ``queued`` rows, oldest first).

A job's directory ``DIR/.eclaw-serve/jobs/ID/`` holds its crawl state (``state/``: a cancelled or
interrupted job resumes from it), items (``items.jsonl``), log (``crawl.log``), trace
(``trace.jsonl``), monitor results (``monitors.json``) and console output (``output.log``). The
process is ``python -m eclaw.service.launch crawl ...`` (:mod:`eclaw.service.launch`): the job's
arguments go to it on its stdin, never on its command line, which every user of the machine can
read. Cancel is a graceful stop (SIGINT: the crawl saves its state and stops) then SIGKILL after
``grace`` seconds. Processes run in a session of their own, so they outlive a crash of the service:
a restarted service adopts a live one, and marks a job whose process is gone ``interrupted`` and
queues it again (it resumes from its state).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eclaw.exceptions import ConfigError
from eclaw.security.redact import MASK, Redactor
from eclaw.service.db import Store
from eclaw.service.flowjobs import LAUNCH, PREFIX, flow_command, flow_file, load_graph, task_states
from eclaw.service.project import Project, redact_args

__all__ = ["ACTIVE", "JobManager"]

logger = logging.getLogger(__name__)

ACTIVE = ("queued", "running", "cancelling")
_TAIL_BYTES = 64 * 1024
_SERVICE_ENV = ("ECLAW_SERVE_TOKEN", "ECLAW_SERVER")
MONITOR_RESULTS = "monitors.json"  # in the job's directory: each job its own


class JobManager:
    """Starts, watches, cancels and cleans up the jobs of one project."""

    def __init__(
        self,
        db: Store,
        project: Project,
        *,
        max_jobs: int = 2,
        grace: float = 10.0,
        keep_jobs: int = 100,
        keep_days: float = 30.0,
        on_failure: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.db, self.project, self.max_jobs, self.grace = db, project, max_jobs, grace
        self.keep_jobs, self.keep_days = keep_jobs, keep_days
        self.root = project.root / ".eclaw-serve" / "jobs"
        self._on_failure = on_failure
        self._secrets: dict[int, dict[str, str]] = {}  # secret argument values: memory only, never written
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._stops: set[asyncio.Task[None]] = set()  # cancels under way
        self._killed: set[int] = set()  # jobs a cancel had to kill (still running after the grace)
        self._wake = asyncio.Event()

    def job_dir(self, job_id: int) -> Path:
        """The directory of job ``job_id``."""
        return self.root / str(job_id)

    def submit(self, spider: str, args: dict[str, str], *, monitors: str | None = None, schedule_id: int | None = None
               ) -> dict[str, Any]:  # fmt: skip
        """Validate and queue a job (a one-line ConfigError if the spider, flow or arguments are bad);
        ``spider`` is a spider, or ``flow:FILE.py`` for a flow job."""
        flow = flow_file(spider)
        if flow is not None:
            load_graph(self.project.check_file(flow, "flow file"))
            if monitors is not None:
                raise ConfigError("monitors: only for spider jobs")
        ref = None if flow is not None else self.project.resolve(spider)
        if monitors is not None:
            self.project.check_file(monitors, "monitors file")
        shown = redact_args(args, ref)
        job_id = self.db.add_job(ref.spec if ref else PREFIX + str(flow), shown, monitors, schedule_id)
        if shown != args:
            self._secrets[job_id] = args
        self._wake.set()
        job = self.db.job(job_id)
        assert job is not None
        return job

    def cancel(self, job_id: int) -> dict[str, Any] | None:
        """Cancel a queued job at once, a running one gracefully; None if there is no such job."""
        job = self.db.job(job_id)
        if job is None:
            return None
        if job["state"] == "queued":
            self.db.update_job(job_id, state="cancelled", finished=time.time(), reason="cancelled before it started")
        elif job["state"] == "running" and job["pid"]:
            self.db.update_job(job_id, state="cancelling")
            self._stop_later(job_id, int(job["pid"]))
        return self.db.job(job_id)

    def _stop_later(self, job_id: int, pid: int) -> None:
        task = asyncio.get_running_loop().create_task(self._stop(job_id, pid))
        self._stops.add(task)
        task.add_done_callback(self._stops.discard)

    def resume(self, job_id: int) -> dict[str, Any] | None:
        """Queue a stopped job again: it resumes from its saved state."""
        job = self.db.job(job_id)
        if job is None or job["state"] in ACTIVE:
            return job
        if MASK in job["args"].values() and job_id not in self._secrets:
            raise ConfigError(f"job {job_id} cannot resume: its secret arguments were not kept (start a new job)")
        self.db.update_job(job_id, state="queued", pid=None, returncode=None, reason=None, finished=None)
        self._wake.set()
        return self.db.job(job_id)

    def recover(self) -> None:
        """After a (re)start: adopt the live processes of ``running`` jobs; queue the others again."""
        for job in self.db.jobs(states=("running", "cancelling"), limit=10_000):
            pid = job["pid"]
            if pid and self._alive(job["id"], int(pid)):
                self._tasks[job["id"]] = asyncio.get_running_loop().create_task(self._adopt(job["id"], int(pid)))
                if job["state"] == "cancelling":  # the service stopped during its grace: the cancel goes on
                    self._stop_later(job["id"], int(pid))
            elif job["state"] == "cancelling":
                self.db.update_job(job["id"], state="cancelled", pid=None, finished=time.time(),
                                   reason="cancelled while the service was down")  # fmt: skip
            elif MASK in job["args"].values():
                self.db.update_job(job["id"], state="interrupted", pid=None, reason="service restarted; secret "
                                   "arguments were not kept")  # fmt: skip
            else:
                self.db.update_job(job["id"], state="queued", pid=None, reason="interrupted: resumed after a restart")

    async def run(self) -> None:
        """Start queued jobs as slots free up (until cancelled)."""
        while True:
            self._wake.clear()
            self._tasks = {k: t for k, t in self._tasks.items() if not t.done()}
            try:
                queued = self.db.queued()
            except ConnectionError as exc:  # the store is down: the queue is read again when it is back
                logger.warning("jobs: %s", exc)
                queued = []
            for job in queued[: max(0, self.max_jobs - len(self._tasks))]:
                self._tasks[job["id"]] = asyncio.get_running_loop().create_task(self._run(job))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 1.0)

    async def close(self) -> None:
        """Stop watching (the crawl processes go on; a restarted service adopts them)."""
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def command(self, job: dict[str, Any]) -> list[str]:
        """The job's command line (its arguments are not on it: :meth:`_run` writes them on its stdin)."""
        folder = self.job_dir(job["id"])
        flow = flow_file(job["spider"])
        if flow is not None:
            return flow_command(sys.executable, flow, folder, job["id"])
        results = str(folder / MONITOR_RESULTS).replace("{", "{{").replace("}", "}}")  # a template
        cmd = [sys.executable, "-m", LAUNCH, "crawl", job["spider"], "--state", str(folder / "state"),
               "-o", str(folder / "items.jsonl"), "--log-file", str(folder / "crawl.log"),
               "--trace", str(folder / "trace.jsonl"), "-s", f"monitors_results={results}", "-q"]  # fmt: skip
        if job["monitors"]:
            cmd += ["--monitors", job["monitors"]]
        return cmd

    async def _run(self, job: dict[str, Any]) -> None:
        if (self.db.job(job["id"]) or {}).get("state") != "queued":  # cancelled since the queue was read
            return
        folder = self.job_dir(job["id"])
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "output.log").open("ab") as out:
            process = await asyncio.create_subprocess_exec(
                *self.command(job), cwd=self.project.root, stdin=asyncio.subprocess.PIPE, stdout=out,
                stderr=out, start_new_session=True, env=_job_env(),
            )  # fmt: skip
        now = self.db.job(job["id"])
        if now is not None and now["state"] == "cancelled":  # cancelled while its process started
            self.db.update_job(job["id"], state="cancelling", pid=process.pid, started=time.time())
            self._stop_later(job["id"], process.pid)
        else:
            self.db.update_job(job["id"], state="running", pid=process.pid, started=time.time())
        try:
            await _send_args(process, self._secrets.get(job["id"], job["args"]))
            code = await process.wait()
        except asyncio.CancelledError:
            return  # the service stops; the crawl goes on and is adopted after a restart
        self._finished(job["id"], code)

    async def _adopt(self, job_id: int, pid: int) -> None:
        while self._alive(job_id, pid):  # noqa: ASYNC110 - not our child: no event tells when it exits
            await asyncio.sleep(0.5)
        self._finished(job_id, None)

    def _finished(self, job_id: int, code: int | None) -> None:
        """Record the end of a job (``code`` None: an adopted process, whose exit code is not known)."""
        job = self.db.job(job_id)
        if job is None:
            return
        state, reason = "failed", f"exit code {code}"
        if job["state"] == "cancelling" and job_id in self._killed:
            self._killed.discard(job_id)
            state, reason = "cancelled", f"cancelled: still running {self.grace:g} s after SIGINT, killed"
        elif job["state"] == "cancelling":
            state, reason = "cancelled", "cancelled (its state is saved: resume continues it)"
        elif code is None:
            state, reason = "finished", "adopted after a service restart: exit code unknown (see the log)"
        elif code in (0, 3):
            failed = [r["name"] for r in self.monitor_results(job_id) or [] if not r["ok"]]
            state, reason = "finished", ("some items were dead-lettered" if code == 3 else "")
            if code == 3 and failed:
                reason = f"monitor(s) failed: {', '.join(failed)}"  # exit 3 of eclaw crawl --monitors
        self.db.update_job(job_id, state=state, returncode=code, reason=reason or None, finished=time.time())
        if state == "failed" and self._on_failure:
            self._on_failure(self.db.job(job_id) or job)
        self._retain()
        self._wake.set()

    async def _stop(self, job_id: int, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGINT)
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and self._alive(job_id, pid):  # noqa: ASYNC110 - maybe adopted
            await asyncio.sleep(0.1)
        if self._alive(job_id, pid):
            self._killed.add(job_id)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)

    def _alive(self, job_id: int, pid: int) -> bool:
        """Whether ``pid`` is still this job's crawl (not a reused pid, not a zombie)."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        zombie = status.rpartition(")")[2].split()[:1] == ["Z"]
        return not zombie and str(self.job_dir(job_id)).encode() in cmdline

    def _retain(self) -> None:
        """Forget finished jobs beyond ``keep_jobs`` or older than ``keep_days`` (rows and directories)."""
        done = [j for j in self.db.jobs(limit=1_000_000) if j["state"] not in ACTIVE and j["state"] != "interrupted"]
        cutoff = time.time() - self.keep_days * 86400
        for index, job in enumerate(done):
            if index >= self.keep_jobs or (job["finished"] or job["created"]) < cutoff:
                shutil.rmtree(self.job_dir(job["id"]), ignore_errors=True)
                self.db.delete_job(job["id"])

    def tasks(self, job: dict[str, Any]) -> list[dict[str, Any]] | None:
        """Each task of a flow job and its state (None for a spider job, or a flow file that no longer loads)."""
        flow = flow_file(job["spider"])
        if flow is None:
            return None
        try:
            graph = load_graph(self.project.check_file(flow, "flow file"))
        except ConfigError:
            return None
        return task_states(graph, self.job_dir(job["id"]), job["id"], job["state"])

    def monitor_results(self, job_id: int) -> list[dict[str, Any]] | None:
        """The results the job's monitors wrote when its crawl ended (``monitors.json`` of its directory,
        its own: :data:`MONITOR_RESULTS`): each ``{"name", "ok", "value", "message"}``; None if it has none."""
        try:
            with (self.job_dir(job_id) / MONITOR_RESULTS).open("rb") as file:
                record = json.loads(file.read(_TAIL_BYTES * 16))
            results = record["results"]
            redactor = Redactor(secrets=self.secret_values(job_id))
            return [{"name": str(r["name"]), "ok": bool(r["ok"]), "value": _value(r.get("value")),
                     "message": redactor.text(str(r["message"]))} for r in results]  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError):  # none (yet): still running, or no monitors
            return None

    def secret_values(self, job_id: int) -> list[str]:
        """The secret argument values of a job (kept in memory only), for redacting what it shows."""
        job = self.db.job(job_id) or {"args": {}}
        given = self._secrets.get(job_id, {})
        return [value for name, value in given.items() if job["args"].get(name) != value]

    def report(self, job_id: int) -> dict[str, Any]:
        """The job's files and their sizes."""
        folder = self.job_dir(job_id)
        files = {p.name: p.stat().st_size for p in sorted(folder.glob("*")) if p.is_file()} if folder.is_dir() else {}
        return {"files": files}

    def items_count(self, job_id: int) -> int:
        """Items written so far (lines of ``items.jsonl``)."""
        path = self.job_dir(job_id) / "items.jsonl"
        count = 0
        with contextlib.suppress(OSError), path.open("rb") as file:
            for chunk in iter(lambda: file.read(1 << 20), b""):
                count += chunk.count(b"\n")
        return count

    def tail(self, job_id: int, name: str, size: int = _TAIL_BYTES) -> str:
        """The last ``size`` bytes of a file of the job (whole lines), or ''."""
        path = self.job_dir(job_id) / name
        try:
            with path.open("rb") as file:
                file.seek(max(0, path.stat().st_size - size))
                data = file.read(size)
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        return text if len(data) < size else text.partition("\n")[2]

    def items(self, job_id: int, limit: int = 20) -> list[str]:
        """The first ``limit`` item lines (raw JSON text, at most 64 KiB each)."""
        lines: list[str] = []
        with contextlib.suppress(OSError), (self.job_dir(job_id) / "items.jsonl").open("rb") as file:
            for line in file:
                if len(lines) >= limit:
                    break
                lines.append(line[:_TAIL_BYTES].decode("utf-8", "replace").rstrip("\n"))
        return lines


async def _send_args(process: asyncio.subprocess.Process, args: dict[str, str]) -> None:
    """Write the job's arguments on its stdin, as :mod:`eclaw.service.launch` reads them, and close it."""
    stdin = process.stdin
    assert stdin is not None
    try:
        stdin.write(json.dumps({"args": args}).encode())
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):  # it ended at once: its exit code and output tell why
        pass
    finally:
        stdin.close()


def _value(value: Any) -> float | str | None:
    """A monitor's value as the job record shows it (a number, a string or null)."""
    if value is None or (isinstance(value, int | float | str) and not isinstance(value, bool)):
        return value
    return str(value)


def _job_env() -> dict[str, str]:
    """The service's environment without its own variables (a crawl reads ``ECLAW_*`` as settings)."""
    return {name: value for name, value in os.environ.items() if name not in _SERVICE_ENV}
