"""The API's OpenAPI 3.1 schema (hand-written; ``tests/service`` validates every response of its run
against it), served at ``/api/openapi.json``."""

from __future__ import annotations

from typing import Any

__all__ = ["SCHEMA"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _op(summary: str, ok: dict[str, Any], *, status: str = "200", body: str | None = None,
        params: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    op: dict[str, Any] = {"summary": summary, "responses": {status: _json(ok)}}
    for code in ("400", "401", "404", "413", "422"):
        op["responses"][code] = _json(_ref("Error"), "one-line reason")
    if body:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(body)}}}
    op["parameters"] = [_PARAMS[name] for name in params]
    return op


_INT = {"type": "integer"}
_STR = {"type": "string"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_INT_OR_NULL = {"type": ["integer", "null"]}
_STR_OR_NULL = {"type": ["string", "null"]}
_ARGS = {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 64}
_PARAMS = {
    "id": {"name": "id", "in": "path", "required": True, "schema": _INT},
    "lines": {"name": "lines", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 10000}},
    "limit": {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
    "state": {"name": "state", "in": "query", "schema": {"type": "string"}},
}
_STATES = ["queued", "running", "cancelling", "cancelled", "finished", "failed", "interrupted"]

SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
    "Health": {
        "type": "object",
        "required": ["status", "version", "running", "queued"],
        "properties": {"status": {"const": "ok"}, "version": {"type": "string"}, "running": _INT, "queued": _INT},
    },
    "Spider": {
        "type": "object",
        "required": ["name", "class", "file", "spec"],
        "properties": {k: {"type": "string"} for k in ("name", "class", "file", "spec")},
    },
    "Spiders": {
        "type": "object",
        "required": ["spiders", "errors"],
        "properties": {
            "spiders": {"type": "array", "items": _ref("Spider")},
            "errors": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "JobStart": {
        "type": "object",
        "description": "give spider (a spider name or FILE.py:Class) or flow (a flow file of the project)",
        "additionalProperties": False,
        "properties": {"spider": {"type": "string"}, "flow": {"type": "string"}, "args": _ARGS,
                       "monitors": {"type": "string"}},
    },
    "Job": {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "spider", "args", "state", "created", "items"],
        "properties": {
            "id": _INT, "spider": {"type": "string"}, "args": _ARGS, "monitors": _STR_OR_NULL,
            "schedule_id": _INT_OR_NULL, "state": {"enum": _STATES}, "pid": _INT_OR_NULL,
            "returncode": _INT_OR_NULL, "reason": _STR_OR_NULL, "created": {"type": "number"},
            "started": _NUM_OR_NULL, "finished": _NUM_OR_NULL, "items": _INT,
            "tasks": {"type": "array", "description": "a flow job's tasks", "items": _ref("Task")},
            "monitor_results": {"type": "array", "description": "a job with monitors: their results at its end",
                                "items": _ref("MonitorResult")},
        },
    },
    "Task": {
        "type": "object",
        "required": ["name", "after", "state"],
        "properties": {"name": _STR, "after": {"type": "array", "items": _STR},
                       "state": {"enum": ["pending", "running", "succeeded", "failed", "skipped", "cancelled"]}},
    },
    "MonitorResult": {
        "type": "object",
        "required": ["name", "ok", "message"],
        "properties": {"name": _STR, "ok": {"type": "boolean"}, "message": _STR,
                       "value": {"type": ["number", "string", "null"]}},
    },
    "Jobs": {"type": "object", "required": ["jobs"], "properties": {"jobs": {"type": "array", "items": _ref("Job")}}},
    "Logs": {"type": "object", "required": ["lines"], "properties": {"lines": {"type": "array", "items": _STR}}},
    "Items": {
        "type": "object",
        "required": ["items", "total"],
        "properties": {"items": {"type": "array", "items": {"type": "object"}}, "total": _INT},
    },
    "Report": {
        "type": "object",
        "required": ["job", "summary", "report"],
        "properties": {
            "job": _ref("Job"),
            "summary": {"type": "array", "items": {"type": "string"}},
            "report": {
                "type": "object",
                "required": ["files"],
                "properties": {"files": {"type": "object", "additionalProperties": _INT}},
            },
        },
    },
    "ScheduleIn": {
        "type": "object",
        "properties": {
            "spider": {"type": "string"}, "cron": {"type": "string", "description": "5 fields, or 6 with seconds last"},
            "timezone": {"type": "string", "default": "UTC"}, "missed": {"enum": ["skip", "catchup"]},
            "args": _ARGS, "enabled": {"type": "boolean"},
        },
    },
    "Schedule": {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "spider", "args", "cron", "timezone", "missed", "enabled", "next_slot", "fired"],
        "properties": {
            "id": _INT, "spider": {"type": "string"}, "args": _ARGS, "cron": {"type": "string"},
            "timezone": {"type": "string"}, "missed": {"enum": ["skip", "catchup"]}, "enabled": {"type": "boolean"},
            "last_slot": _NUM_OR_NULL, "created": {"type": "number"}, "next_slot": {"type": "string"}, "fired": _INT,
        },
    },
    "Schedules": {
        "type": "object",
        "required": ["schedules"],
        "properties": {"schedules": {"type": "array", "items": _ref("Schedule")}},
    },
    "Deleted": {"type": "object", "required": ["deleted"], "properties": {"deleted": _INT}},
}

SCHEMA: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "eclaw serve", "version": "1", "description": "Jobs and schedules of an eclaw project."},
    "components": {
        "schemas": SCHEMAS,
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    },
    "security": [{}, {"bearer": []}],
    "paths": {
        "/api/health": {"get": _op("Service health", _ref("Health"))},
        "/api/openapi.json": {"get": _op("This schema", {"type": "object", "required": ["openapi", "paths"]})},
        "/api/spiders": {"get": _op("The project's spiders, and files that fail to load", _ref("Spiders"))},
        "/api/jobs": {
            "get": _op("Jobs, newest first", _ref("Jobs"), params=("state", "limit")),
            "post": _op("Queue a job (validated first)", _ref("Job"), status="201", body="JobStart"),
        },
        "/api/jobs/{id}": {"get": _op("One job", _ref("Job"), params=("id",))},
        "/api/jobs/{id}/cancel": {"post": _op("Cancel: SIGINT, SIGKILL after the grace", _ref("Job"), params=("id",))},
        "/api/jobs/{id}/resume": {"post": _op("Queue a stopped job again", _ref("Job"), params=("id",))},
        "/api/jobs/{id}/logs": {"get": _op("Log tail (redacted)", _ref("Logs"), params=("id", "lines"))},
        "/api/jobs/{id}/items": {"get": _op("First items", _ref("Items"), params=("id", "limit"))},
        "/api/jobs/{id}/report": {"get": _op("Summary and files", _ref("Report"), params=("id",))},
        "/api/schedules": {
            "get": _op("Schedules", _ref("Schedules")),
            "post": _op("Add a schedule", _ref("Schedule"), status="201", body="ScheduleIn"),
        },
        "/api/schedules/{id}": {
            "get": _op("One schedule", _ref("Schedule"), params=("id",)),
            "patch": _op("Change a schedule", _ref("Schedule"), body="ScheduleIn", params=("id",)),
            "delete": _op("Remove a schedule", _ref("Deleted"), params=("id",)),
        },
    },
}
