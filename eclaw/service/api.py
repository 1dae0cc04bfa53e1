"""The JSON API (aiohttp routes under ``/api/``); its schema is :mod:`eclaw.service.openapi`.

Every error is ``{"error": "one line"}`` with a 4xx status; bad input never starts a job and never
stops the service. No endpoint takes code: a job names a spider file of the project.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from eclaw import __version__
from eclaw.exceptions import ConfigError, EclawError
from eclaw.security.redact import Redactor
from eclaw.service.flowjobs import PREFIX
from eclaw.service.jobs import JobManager
from eclaw.service.openapi import SCHEMA
from eclaw.service.project import validate_args
from eclaw.service.schedules import Scheduler

__all__ = ["JOBS", "SCHEDULER", "auth_middleware", "routes"]

JOBS: web.AppKey[JobManager] = web.AppKey("jobs", JobManager)
SCHEDULER: web.AppKey[Scheduler] = web.AppKey("scheduler", Scheduler)
_MAX_BODY = 64 * 1024
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: type[web.HTTPError], message: str) -> web.HTTPError:
    return status(text=json.dumps({"error": message}), content_type="application/json")


def auth_middleware(token: str | None) -> Any:
    """When a token is set, require it on every path: ``Authorization: Bearer TOKEN``, or (the web UI)
    the ``eclaw_token`` cookie that opening ``/?token=TOKEN`` once sets."""

    def good(value: str) -> bool:
        return bool(token) and hmac.compare_digest(value.encode(), str(token).encode())

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if token:
            if request.path == "/" and good(request.query.get("token", "")):
                response = web.HTTPSeeOther("/")
                response.set_cookie("eclaw_token", token, httponly=True, samesite="Strict")
                raise response
            header = request.headers.get("Authorization", "").removeprefix("Bearer ")
            if not (good(header) or good(request.cookies.get("eclaw_token", ""))):
                raise _error(web.HTTPUnauthorized, "missing or wrong token (Authorization: Bearer …)")
        try:
            return await handler(request)
        except ConfigError as exc:
            raise _error(web.HTTPBadRequest, str(exc).splitlines()[0]) from None
        except EclawError as exc:
            raise _error(web.HTTPUnprocessableEntity, str(exc).splitlines()[0]) from None

    return middleware


async def _body(request: web.Request) -> Any:
    if request.content_length is not None and request.content_length > _MAX_BODY:
        raise _error(web.HTTPRequestEntityTooLarge, f"body over {_MAX_BODY} bytes")
    try:
        return json.loads(await request.content.read(_MAX_BODY + 1) or b"{}")
    except ValueError:
        raise _error(web.HTTPBadRequest, "body: not valid JSON") from None


def _int(request: web.Request, name: str, default: int, top: int) -> int:
    raw = request.match_info.get(name) or request.query.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 0 < int(raw) <= top:
        raise _error(web.HTTPBadRequest, f"{name}: must be an integer from 1 to {top}")
    return int(raw)


def _job(request: web.Request) -> tuple[JobManager, dict[str, Any]]:
    jobs = request.app[JOBS]
    job = jobs.db.job(_int(request, "id", 0, 2**62))
    if job is None:
        raise _error(web.HTTPNotFound, f"no job {request.match_info['id']}")
    return jobs, job


def _view(jobs: JobManager, job: dict[str, Any]) -> dict[str, Any]:
    view = {**job, "items": jobs.items_count(job["id"])}
    tasks = jobs.tasks(job)
    if tasks is not None:
        view["tasks"] = tasks
    results = jobs.monitor_results(job["id"])  # a monitors file's, or the spider's own monitors
    if results is not None or job["monitors"]:
        view["monitor_results"] = results or []
    return view


def _redactor(jobs: JobManager, job: dict[str, Any]) -> Redactor:
    return Redactor(secrets=jobs.secret_values(job["id"]))


async def health(request: web.Request) -> web.Response:
    jobs = request.app[JOBS]
    running = jobs.db.jobs(states=("running", "cancelling"))
    queued = jobs.db.jobs(states=("queued",))
    return web.json_response({"status": "ok", "version": __version__, "running": len(running), "queued": len(queued)})


async def spiders(request: web.Request) -> web.Response:
    found, errors = request.app[JOBS].project.spiders()
    return web.json_response({"spiders": [ref.as_dict() for ref in found], "errors": errors})


async def list_jobs(request: web.Request) -> web.Response:
    jobs = request.app[JOBS]
    state = request.query.get("state")
    records = jobs.db.jobs(states=(state,) if state else (), limit=_int(request, "limit", 100, 1000))
    return web.json_response({"jobs": [_view(jobs, job) for job in records]})


async def start_job(request: web.Request) -> web.Response:
    data = await _body(request)
    if isinstance(data, dict) and isinstance(data.get("flow"), str) and "spider" not in data:
        flow = data.pop("flow")
        data["spider"] = PREFIX + flow
    if not isinstance(data, dict) or not isinstance(data.get("spider"), str):
        raise ConfigError("spider: required (a spider name or FILE.py:Class), or flow: a flow file of the project")
    unknown = set(data) - {"spider", "args", "monitors"}
    if unknown:
        raise ConfigError(f"unknown field(s): {', '.join(sorted(unknown))}")
    monitors = data.get("monitors")
    if monitors is not None and not isinstance(monitors, str):
        raise ConfigError("monitors: must be a file name of the project")
    jobs = request.app[JOBS]
    job = jobs.submit(data["spider"], validate_args(data.get("args")), monitors=monitors)
    return web.json_response(_view(jobs, job), status=201)


async def show_job(request: web.Request) -> web.Response:
    jobs, job = _job(request)
    return web.json_response(_view(jobs, job))


async def cancel_job(request: web.Request) -> web.Response:
    jobs, job = _job(request)
    return web.json_response(_view(jobs, jobs.cancel(job["id"]) or job))


async def resume_job(request: web.Request) -> web.Response:
    jobs, job = _job(request)
    return web.json_response(_view(jobs, jobs.resume(job["id"]) or job))


async def job_logs(request: web.Request) -> web.Response:
    jobs, job = _job(request)
    lines = _int(request, "lines", 100, 10_000)
    redactor = _redactor(jobs, job)
    text = jobs.tail(job["id"], "crawl.log") + jobs.tail(job["id"], "output.log")
    return web.json_response({"lines": [redactor.text(line) for line in text.splitlines()[-lines:]]})


async def job_items(request: web.Request) -> web.Response:
    jobs, job = _job(request)
    items = []
    for line in jobs.items(job["id"], _int(request, "limit", 20, 1000)):
        try:
            items.append(json.loads(line))
        except ValueError:
            items.append({"_unparsed": line[:200]})
    return web.json_response({"items": items, "total": jobs.items_count(job["id"])})


async def job_report(request: web.Request) -> web.Response:
    jobs, job = _job(request)
    redactor = _redactor(jobs, job)
    summary = [redactor.text(line) for line in jobs.tail(job["id"], "output.log", 8192).splitlines()[-30:]]
    return web.json_response({"job": _view(jobs, job), "summary": summary, "report": jobs.report(job["id"])})


async def list_schedules(request: web.Request) -> web.Response:
    scheduler = request.app[SCHEDULER]
    views = [scheduler.view(record["id"]) for record in scheduler.db.schedules()]
    return web.json_response({"schedules": [view for view in views if view]})


async def add_schedule(request: web.Request) -> web.Response:
    return web.json_response(request.app[SCHEDULER].add(await _body(request)), status=201)


def _schedule_id(request: web.Request) -> int:
    return _int(request, "id", 0, 2**62)


async def show_schedule(request: web.Request) -> web.Response:
    view = request.app[SCHEDULER].view(_schedule_id(request))
    if view is None:
        raise _error(web.HTTPNotFound, f"no schedule {request.match_info['id']}")
    return web.json_response(view)


async def update_schedule(request: web.Request) -> web.Response:
    view = request.app[SCHEDULER].update(_schedule_id(request), await _body(request))
    if view is None:
        raise _error(web.HTTPNotFound, f"no schedule {request.match_info['id']}")
    return web.json_response(view)


async def delete_schedule(request: web.Request) -> web.Response:
    if not request.app[SCHEDULER].db.delete_schedule(_schedule_id(request)):
        raise _error(web.HTTPNotFound, f"no schedule {request.match_info['id']}")
    return web.json_response({"deleted": int(request.match_info["id"])})


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(SCHEMA)


def routes() -> list[web.RouteDef]:
    """The API's routes."""
    return [
        web.get("/api/health", health),
        web.get("/api/openapi.json", openapi),
        web.get("/api/spiders", spiders),
        web.get("/api/jobs", list_jobs),
        web.post("/api/jobs", start_job),
        web.get("/api/jobs/{id}", show_job),
        web.post("/api/jobs/{id}/cancel", cancel_job),
        web.post("/api/jobs/{id}/resume", resume_job),
        web.get("/api/jobs/{id}/logs", job_logs),
        web.get("/api/jobs/{id}/items", job_items),
        web.get("/api/jobs/{id}/report", job_report),
        web.get("/api/schedules", list_schedules),
        web.post("/api/schedules", add_schedule),
        web.get("/api/schedules/{id}", show_schedule),
        web.patch("/api/schedules/{id}", update_schedule),
        web.delete("/api/schedules/{id}", delete_schedule),
    ]
