"""The service process: the aiohttp application, its job manager and scheduler, and :func:`serve`."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from eclaw.exceptions import ConfigError
from eclaw.service import ui
from eclaw.service.api import JOBS, SCHEDULER, auth_middleware, routes
from eclaw.service.db import open_store
from eclaw.service.jobs import JobManager
from eclaw.service.notify import Notifier
from eclaw.service.project import Project
from eclaw.service.schedules import Scheduler

__all__ = ["ServiceConfig", "make_app", "serve"]

_LOCAL = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceConfig:
    """How ``eclaw serve`` runs (see ``eclaw serve --help``)."""

    project: Path
    host: str = "127.0.0.1"
    port: int = 8700
    max_jobs: int = 2
    token: str | None = None
    grace: float = 10.0
    keep_jobs: int = 100
    keep_days: float = 30.0
    alerts: str | None = None
    store: str | None = None  # --store: None for SQLite in the project

    def __post_init__(self) -> None:
        if self.host not in _LOCAL and not self.token:
            raise ConfigError(f"--host {self.host} needs a token (--token or ECLAW_SERVE_TOKEN)")
        if self.max_jobs < 1:
            raise ConfigError("--max-jobs must be at least 1")


def make_app(config: ServiceConfig) -> web.Application:
    """The service's application (its jobs and schedules start with it)."""
    project = Project(config.project)
    db = open_store(config.store, project.root)
    notifier = Notifier(config.alerts)

    def failed(job: dict[str, object]) -> None:
        notifier.notify("job_failed", f"job {job['id']} failed", f"{job['spider']}: {job['reason']}", job=job["id"])

    jobs = JobManager(db, project, max_jobs=config.max_jobs, grace=config.grace, keep_jobs=config.keep_jobs,
                      keep_days=config.keep_days, on_failure=failed)  # fmt: skip
    scheduler = Scheduler(db, jobs, notifier)
    app = web.Application(middlewares=[auth_middleware(config.token)], client_max_size=64 * 1024)
    app[JOBS], app[SCHEDULER] = jobs, scheduler
    app.add_routes(routes())
    app.add_routes(ui.routes())

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        jobs.recover()
        tasks = [asyncio.create_task(jobs.run()), asyncio.create_task(scheduler.run())]
        yield
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await jobs.close()
        await notifier.close()
        db.close()

    app.cleanup_ctx.append(lifecycle)
    return app


def serve(config: ServiceConfig) -> None:
    """Run the service until SIGINT/SIGTERM."""
    app = make_app(config)
    print(f"eclaw serve: http://{config.host}:{config.port}/ (project {config.project}, pid {os.getpid()})", flush=True)
    web.run_app(app, host=config.host, port=config.port, print=None, handle_signals=True, shutdown_timeout=2.0)
