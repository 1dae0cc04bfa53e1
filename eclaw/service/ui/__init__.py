"""The web UI of ``eclaw serve``: server-rendered pages (:mod:`eclaw.service.ui.pages`) with a few
lines of plain JavaScript for live progress (server-sent events), no build step. Every POST carries
a CSRF token: the value of the ``eclaw_csrf`` cookie, in a hidden field, compared in constant time."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import secrets
from urllib.parse import quote

from aiohttp import web

from eclaw.exceptions import EclawError
from eclaw.security.redact import Redactor
from eclaw.service.api import JOBS, SCHEDULER
from eclaw.service.project import validate_args
from eclaw.service.ui import pages

__all__ = ["routes"]

_COOKIE = "eclaw_csrf"


def _csrf(request: web.Request) -> str:
    return request.cookies.get(_COOKIE) or secrets.token_urlsafe(24)


def _page(request: web.Request, body: str, title: str) -> web.Response:
    token = _csrf(request)
    response = web.Response(text=pages.layout(title, body.replace(pages.CSRF, token)), content_type="text/html")
    response.set_cookie(_COOKIE, token, httponly=True, samesite="Strict")
    response.headers["Content-Security-Policy"] = "default-src 'self'; style-src 'unsafe-inline'; script-src 'self'"
    return response


async def _form(request: web.Request) -> dict[str, str]:
    """The POSTed form, after its CSRF check (403 if the token is missing or wrong)."""
    form = await request.post()
    cookie, given = request.cookies.get(_COOKIE, ""), str(form.get("csrf", ""))
    if not cookie or not hmac.compare_digest(cookie.encode(), given.encode()):
        raise web.HTTPForbidden(text="CSRF token missing or wrong: reload the page")
    return {name: str(value) for name, value in form.items()}


async def jobs_page(request: web.Request) -> web.Response:
    jobs = request.app[JOBS]
    records = [{**job, "items": jobs.items_count(job["id"])} for job in jobs.db.jobs(limit=100)]
    spiders, errors = jobs.project.spiders()
    return _page(request, pages.jobs(records, spiders, errors, request.query.get("error", "")), "Jobs")


async def job_page(request: web.Request) -> web.Response:
    jobs = request.app[JOBS]
    job_id = int(request.match_info["id"])
    job = jobs.db.job(job_id)
    if job is None:
        raise web.HTTPNotFound(text=f"no job {job_id}")
    redactor = Redactor(secrets=jobs.secret_values(job_id))
    log = [redactor.text(line) for line in jobs.tail(job_id, "crawl.log", 16384).splitlines()[-100:]]
    summary = [redactor.text(line) for line in jobs.tail(job_id, "output.log", 8192).splitlines()[-30:]]
    view = {**job, "items": jobs.items_count(job_id), "tasks": jobs.tasks(job),
            "monitor_results": jobs.monitor_results(job_id) or ([] if job["monitors"] else None)}  # fmt: skip
    body = pages.job(view, jobs.items(job_id, 10), log, summary, jobs.report(job_id))
    return _page(request, body, f"Job {job_id}")


async def schedules_page(request: web.Request) -> web.Response:
    scheduler = request.app[SCHEDULER]
    views = [view for record in scheduler.db.schedules() if (view := scheduler.view(record["id"]))]
    spiders, _ = scheduler.jobs.project.spiders()
    return _page(request, pages.schedules(views, spiders, request.query.get("error", "")), "Schedules")


def _args(text: str) -> dict[str, str]:
    pairs = {}
    for line in text.splitlines():
        if line.strip():
            name, _, value = line.strip().partition("=")
            pairs[name.strip()] = value.strip()
    return validate_args(pairs)


def _back(where: str, error: str) -> web.HTTPSeeOther:
    return web.HTTPSeeOther(f"{where}?error={quote(error)}")


async def start_job(request: web.Request) -> web.Response:
    form = await _form(request)
    try:
        job = request.app[JOBS].submit(form.get("spider", ""), _args(form.get("args", "")))
    except EclawError as exc:
        raise _back("/", str(exc).splitlines()[0]) from None
    raise web.HTTPSeeOther(f"/jobs/{job['id']}")


async def cancel_job(request: web.Request) -> web.Response:
    await _form(request)
    request.app[JOBS].cancel(int(request.match_info["id"]))
    back = request.headers.get("Referer", "")
    raise web.HTTPSeeOther(back if back.startswith(f"{request.scheme}://{request.host}/") else "/")


async def add_schedule(request: web.Request) -> web.Response:
    form = await _form(request)
    try:
        data = {key: form.get(key, "") for key in ("spider", "cron", "timezone", "missed")}
        request.app[SCHEDULER].add({**data, "args": _args(form.get("args", ""))})
    except EclawError as exc:
        raise _back("/schedules", str(exc).splitlines()[0]) from None
    raise web.HTTPSeeOther("/schedules")


async def delete_schedule(request: web.Request) -> web.Response:
    await _form(request)
    request.app[SCHEDULER].db.delete_schedule(int(request.match_info["id"]))
    raise web.HTTPSeeOther("/schedules")


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: every second, the state and item count of the newest jobs."""
    jobs = request.app[JOBS]
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    with contextlib.suppress(ConnectionResetError):  # the page was closed
        while True:
            view = [{"id": j["id"], "state": j["state"], "items": jobs.items_count(j["id"]), "tasks": jobs.tasks(j)}
                    for j in jobs.db.jobs()]  # fmt: skip
            await response.write(f"data: {json.dumps(view)}\n\n".encode())
            await asyncio.sleep(1.0)
    return response


async def script(request: web.Request) -> web.Response:
    return web.Response(text=pages.SCRIPT, content_type="application/javascript")


def routes() -> list[web.RouteDef]:
    """The UI's routes."""
    return [
        web.get("/", jobs_page),
        web.get("/jobs/{id:\\d+}", job_page),
        web.get("/schedules", schedules_page),
        web.get("/ui/events", events),
        web.get("/ui/live.js", script),
        web.post("/ui/jobs", start_job),
        web.post("/ui/jobs/{id:\\d+}/cancel", cancel_job),
        web.post("/ui/schedules", add_schedule),
        web.post("/ui/schedules/{id:\\d+}/delete", delete_schedule),
    ]
