"""The HTML of the web UI (every value escaped), and its one script (live progress by SSE)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Any

from eclaw.service.project import SpiderRef

__all__ = ["CSRF", "SCRIPT", "dag", "job", "jobs", "layout", "schedules"]

CSRF = "\x00csrf\x00"  # replaced by the request's CSRF token
_STYLE = """body{font:14px system-ui,sans-serif;margin:0;color:#222}nav{background:#234;padding:.6em 1em}
nav a{color:#fff;margin-right:1.2em;text-decoration:none;font-weight:600}main{padding:1em 1.5em;max-width:72em}
table{border-collapse:collapse;width:100%;margin:.5em 0 1.5em}td,th{border-bottom:1px solid #ddd;padding:.35em .5em;
text-align:left}th{background:#f3f5f7}.state-running{color:#06c;font-weight:600}.state-failed{color:#b00}
.state-finished{color:#080}.state-cancelled,.state-interrupted{color:#a60}pre{background:#f6f8fa;padding:.6em;
overflow:auto;max-height:24em;font-size:12px}form.inline{display:inline}.error{background:#fee;border:1px solid #e99;
padding:.5em;margin:.5em 0}fieldset{border:1px solid #ccc;margin:.5em 0 1.5em}label{display:block;margin:.3em 0}
input[type=text],textarea,select{font:inherit;width:28em;max-width:100%}button{font:inherit;padding:.2em .8em}
.dag{display:flex;gap:2.5em;align-items:center;margin:.5em 0 1.5em}.layer{display:flex;flex-direction:column;gap:.6em}
.task{border:2px solid #999;border-radius:6px;padding:.4em .8em;min-width:9em;background:#f3f5f7}
.task small{display:block;color:#555}
.task-running{border-color:#06c;background:#e6f0fb}.task-succeeded{border-color:#080;background:#e7f6e7}
.task-failed{border-color:#b00;background:#fde8e8}.task-skipped{border-color:#a60;background:#fbf3e3}
.task-cancelled{border-color:#a60;border-style:dashed;background:#f3f5f7}"""
SCRIPT = """
const source = new EventSource('/ui/events');
source.onmessage = (event) => {
  for (const job of JSON.parse(event.data)) {
    const row = document.querySelector(`[data-job="${job.id}"]`);
    if (!row) continue;
    row.querySelector('.items').textContent = job.items;
    const state = row.querySelector('.state');
    state.textContent = job.state;
    state.className = 'state state-' + job.state;
    const cancel = row.querySelector('.cancel');
    if (cancel) cancel.hidden = !['queued', 'running'].includes(job.state);
    for (const task of job.tasks || []) {
      const box = document.querySelector(`[data-dag="${job.id}"] [data-task="${CSS.escape(task.name)}"]`);
      if (box) { box.className = 'task task-' + task.state; box.querySelector('.task-state').textContent = task.state; }
    }
  }
};
"""
_ACTIVE = ("queued", "running")


def layout(title: str, body: str) -> str:
    """A whole page."""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)} · eclaw</title>"
        f"<style>{_STYLE}</style><script src='/ui/live.js' defer></script></head><body>"
        "<nav><a href='/'>Jobs</a><a href='/schedules'>Schedules</a><a href='/api/openapi.json'>API</a></nav>"
        f"<main><h1>{escape(title)}</h1>{body}</main></body></html>"
    )


def _when(stamp: float | None) -> str:
    return datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S") if stamp else ""


def _error(error: str) -> str:
    return f"<p class='error' role='alert'>{escape(error)}</p>" if error else ""


def _spider_select(spiders: Sequence[SpiderRef]) -> str:
    options = "".join(f"<option value='{escape(s.spec)}'>{escape(s.name or s.cls)} ({escape(s.spec)})</option>"
                      for s in spiders)  # fmt: skip
    return f"<label>Spider <select name='spider'>{options}</select></label>"


def _cancel(job_id: int, state: str) -> str:
    hidden = "" if state in _ACTIVE else " hidden"
    return (f"<form class='inline cancel' method='post' action='/ui/jobs/{job_id}/cancel'{hidden}>"
            f"<input type='hidden' name='csrf' value='{CSRF}'><button>Cancel</button></form>")  # fmt: skip


def jobs(records: list[dict[str, Any]], spiders: Sequence[SpiderRef], errors: dict[str, str], error: str) -> str:
    """The jobs list (live), the start form, the files that fail to load."""
    rows = "".join(
        f"<tr data-job='{j['id']}'><td><a href='/jobs/{j['id']}'>{j['id']}</a></td><td>{escape(j['spider'])}</td>"
        f"<td class='state state-{escape(j['state'])}'>{escape(j['state'])}</td><td class='items'>{j['items']}</td>"
        f"<td>{_when(j['created'])}</td><td>{escape(j['reason'] or '')}</td>"
        f"<td>{_cancel(j['id'], j['state'])}</td></tr>"
        for j in records
    )
    broken = "".join(f"<li><b>{escape(f)}</b>: {escape(r)}</li>" for f, r in errors.items())
    return (
        f"{_error(error)}<table><tr><th>#</th><th>spider</th><th>state</th><th>items</th><th>created</th>"
        f"<th>reason</th><th></th></tr>{rows}</table>"
        f"<fieldset><legend>Start a job</legend><form method='post' action='/ui/jobs'>"
        f"<input type='hidden' name='csrf' value='{CSRF}'>{_spider_select(spiders)}"
        "<label>Arguments (NAME=VALUE, one a line)<br><textarea name='args' rows='3'></textarea></label>"
        "<button>Start</button></form></fieldset>"
        + (f"<h2>Files that do not load</h2><ul>{broken}</ul>" if broken else "")
    )


def dag(job_id: int, tasks: list[dict[str, Any]]) -> str:
    """A flow job's DAG: its tasks in layers (a task's layer is one past its deepest dependency), each box
    coloured by its state (kept live by the page's script); a box names the tasks it runs after."""
    depth: dict[str, int] = {}
    for task in tasks:  # ``tasks`` is in dependency order
        depth[task["name"]] = 1 + max((depth[d] for d in task["after"] if d in depth), default=-1)
    layers = []
    for level in range(max(depth.values(), default=-1) + 1):
        boxes = "".join(
            f"<div class='task task-{escape(t['state'])}' data-task='{escape(t['name'])}'><b>{escape(t['name'])}</b>"
            f"<small class='task-state'>{escape(t['state'])}</small>"
            + (f"<small>after {escape(', '.join(t['after']))}</small>" if t["after"] else "") + "</div>"
            for t in tasks if depth[t["name"]] == level
        )  # fmt: skip
        layers.append(f"<div class='layer'>{boxes}</div>")
    return f"<h2>Tasks</h2><div class='dag' data-dag='{job_id}'>{'→'.join(layers)}</div>"


def _monitors(results: list[dict[str, Any]] | None) -> str:
    if results is None:
        return ""
    rows = "".join(
        f"<tr class='monitor'><td>{escape(r['name'])}</td><td class='state-{'finished' if r['ok'] else 'failed'}'>"
        f"{'ok' if r['ok'] else 'FAILED'}</td><td>{escape(r['message'])}</td></tr>"
        for r in results
    )
    return f"<h2>Monitors</h2><table class='monitors'>{rows or '<tr><td>no results yet</td></tr>'}</table>"


def job(record: dict[str, Any], items: list[str], log: list[str], summary: list[str], report: dict[str, Any]) -> str:
    """One job: its state (live), report, items preview and log tail."""
    args = "".join(f"<li>{escape(k)} = {escape(v)}</li>" for k, v in record["args"].items())
    files = "".join(f"<li>{escape(name)}: {size} bytes</li>" for name, size in report["files"].items())
    pretty = []
    for line in items:
        try:
            pretty.append(json.dumps(json.loads(line), ensure_ascii=False))
        except ValueError:
            pretty.append(line)
    return (
        f"<table><tr data-job='{record['id']}'><th>spider</th><td>{escape(record['spider'])}</td><th>state</th>"
        f"<td class='state state-{escape(record['state'])}'>{escape(record['state'])}</td><th>items</th>"
        f"<td class='items'>{record['items']}</td><td>{_cancel(record['id'], record['state'])}</td></tr></table>"
        f"<p>created {_when(record['created'])} · started {_when(record['started'])} · finished "
        f"{_when(record['finished'])} · exit code {record['returncode']} · {escape(record['reason'] or '')}</p>"
        + (dag(record["id"], record["tasks"]) if record.get("tasks") is not None else "")
        + _monitors(record.get("monitor_results"))
        + f"<h2>Arguments</h2><ul>{args}</ul><h2>Report</h2><pre>{escape(chr(10).join(summary))}</pre>"
        f"<ul>{files}</ul><h2>Items (first {len(pretty)})</h2><pre>{escape(chr(10).join(pretty))}</pre>"
        f"<h2>Log</h2><pre>{escape(chr(10).join(log))}</pre>"
    )


def schedules(views: list[dict[str, Any]], spiders: Sequence[SpiderRef], error: str) -> str:
    """The schedules and the schedule editor."""
    rows = "".join(
        f"<tr><td>{s['id']}</td><td>{escape(s['spider'])}</td><td><code>{escape(s['cron'])}</code></td>"
        f"<td>{escape(s['timezone'])}</td><td>{escape(s['missed'])}</td><td>{'on' if s['enabled'] else 'off'}</td>"
        f"<td>{escape(s['next_slot'])}</td><td>{s['fired']}</td><td><form class='inline' method='post' "
        f"action='/ui/schedules/{s['id']}/delete'><input type='hidden' name='csrf' value='{CSRF}'>"
        "<button>Remove</button></form></td></tr>"
        for s in views
    )
    return (
        f"{_error(error)}<table><tr><th>#</th><th>spider</th><th>cron</th><th>time zone</th><th>missed</th>"
        f"<th>enabled</th><th>next slot</th><th>fired</th><th></th></tr>{rows}</table>"
        f"<fieldset><legend>Add a schedule</legend><form method='post' action='/ui/schedules'>"
        f"<input type='hidden' name='csrf' value='{CSRF}'>{_spider_select(spiders)}"
        "<label>Cron (5 fields, or 6 with seconds last) <input type='text' name='cron' value='0 6 * * *'></label>"
        "<label>Time zone <input type='text' name='timezone' value='UTC'></label>"
        "<label>Missed slots <select name='missed'><option>skip</option><option>catchup</option></select></label>"
        "<label>Arguments (NAME=VALUE, one a line)<br><textarea name='args' rows='2'></textarea></label>"
        "<button>Add</button></form></fieldset>"
    )
