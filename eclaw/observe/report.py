"""Reading a crawl's event trace (``--trace``): one request's life, and a self-contained HTML report."""

from __future__ import annotations

import html
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eclaw.exceptions import ConfigError
from eclaw.security.redact import redact_url

__all__ = ["lifecycle", "read_trace", "render_report", "totals"]

Record = dict[str, Any]


def read_trace(path: str | Path) -> list[Record]:
    """The events of a trace file; a clear :class:`ConfigError` if it is missing or not a trace."""
    try:
        with open(path, encoding="utf-8") as file:
            records = [json.loads(line) for line in file if line.strip()]
    except OSError as exc:
        raise ConfigError(f"cannot read the trace {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not a trace (line {exc.lineno}: {exc.msg})") from None
    if records and "event" not in records[0]:
        raise ConfigError(f"{path} is not a trace written by --trace")
    return records


def _describe(record: Record) -> str:
    event = record["event"]
    if event == "ResponseDownloaded":
        return f"{record.get('status')}, {record.get('bytes', 0)} bytes"
    if event == "RequestFailed":
        what = "final" if record.get("final", True) else "will retry"
        links = f", {record['duplicates']} links dropped as duplicates" if record.get("duplicates") else ""
        return f"attempt {record.get('attempt')}: {record.get('reason')} ({what}{links})"
    if event in ("RequestDropped", "ItemDropped"):
        return str(record.get("reason", ""))
    if event == "ResponseParsed":
        duplicates = f" ({record['duplicates']} dropped as duplicates)" if record.get("duplicates") else ""
        return f"{record.get('items', 0)} items, {record.get('requests', 0)} requests{duplicates}"
    if event in ("ItemParsed", "ItemStored"):
        return str(record.get("type", ""))
    return ""


def lifecycle(records: Iterable[Record], *, url: str | None = None, request_id: int | None = None) -> str:
    """The events of one request (by id, or every request for ``url``), with times."""
    by_id: dict[int, list[Record]] = defaultdict(list)
    for record in records:
        if "id" in record:
            by_id[record["id"]].append(record)
    wanted = url.partition("#")[0] if url else None
    if request_id is not None:
        ids = [request_id] if request_id in by_id else []
    else:
        # a request is found by the URL it was made for, or any URL it was fetched at (a redirect's end)
        ids = [i for i, events in by_id.items() if any(e.get("url", "").partition("#")[0] == wanted for e in events)]
    duplicates = [i for i in ids if any(e.get("reason") == "duplicate" for e in by_id[i])]
    shown = [i for i in ids if i not in duplicates] or duplicates[:1]
    if not shown:
        return f"no request {'id ' + str(request_id) if request_id is not None else url} in this trace"
    lines = []
    for ident in shown:
        events = by_id[ident]
        lines.append(f"request {ident} {events[0].get('url', '')}")
        start = scheduled = events[0]["t"]
        for record in events:
            note = _describe(record)
            if record["event"] == "RequestScheduled":
                scheduled = record["t"]
            if record["event"] == "ResponseDownloaded":
                note += f" (download {record['t'] - scheduled:.3f}s)"
                if record.get("url", "").partition("#")[0] != events[0].get("url", "").partition("#")[0]:
                    note += f" from {record['url']}"  # redirected
            lines.append(f"  {record['t'] - start:+8.3f}s  {record['event']:<18} {note}".rstrip())
    if duplicates and len(shown) < len(ids):
        lines.append(f"(and {len(duplicates)} more links to it, dropped as duplicates)")
    return "\n".join(lines)


def totals(records: Iterable[Record]) -> dict[str, Any]:
    """The request counts of the crawl a trace recorded, named as in :class:`~eclaw.stats.Stats`:
    ``requests_generated`` (the request ids in the trace, plus the links counted as ``duplicates``),
    ``requests_parsed``, ``requests_failed`` (for good), ``requests_dropped`` (with the duplicates)
    and ``dropped_by_reason``; ``requests_pending``: those that reached none of the three (a crawl
    stopped early)."""
    ids: set[int] = set()
    parsed = failed = duplicates = 0
    dropped: Counter[str] = Counter()
    for record in records:
        if "id" in record:
            ids.add(record["id"])
        event = record["event"]
        if event == "RequestDropped":
            dropped[str(record.get("reason"))] += 1
        elif event == "ResponseParsed":
            parsed += 1
        elif event == "RequestFailed" and record.get("final", True):
            failed += 1
        duplicates += record.get("duplicates", 0)  # a page's links seen already, summed in its last line
    if duplicates:
        dropped["duplicate"] += duplicates
    generated = len(ids) + duplicates
    return {
        "requests_generated": generated,
        "requests_parsed": parsed,
        "requests_failed": failed,
        "requests_dropped": dropped.total(),
        "requests_pending": generated - parsed - failed - dropped.total(),
        "dropped_by_reason": dropped,
    }


# -- the HTML report ---------------------------------------------------------------------

# One page, no scripts: bar charts are HTML (their labels wrap, never cut; a tooltip repeats them),
# column charts are SVG drawn in percent of the page's width, with their axes' values in HTML.
_STYLE = (
    "*{box-sizing:border-box}html,body{margin:0}body{font:14px/1.4 system-ui,sans-serif;color:#222}"
    "main{width:100%;padding:16px 24px}h2{font-size:1.1em;margin:1.6em 0 .5em}"
    ".bars{display:grid;grid-template-columns:minmax(6em,40%) 1fr auto;gap:4px 10px;align-items:center}"
    ".label{overflow-wrap:anywhere;text-align:right}.track{display:block;min-width:0}"
    ".bar{display:block;height:16px;min-width:1px;background:#4c78a8}.value{font-variant-numeric:tabular-nums}"
    "figure{margin:0;display:grid;grid-template-columns:auto 1fr;gap:4px 8px}svg{display:block}"
    ".plot rect{fill:#f58518}.axis{font-size:12px;color:#555;font-variant-numeric:tabular-nums}"
    ".axis.y{display:flex;flex-direction:column;justify-content:space-between;text-align:right}"
    ".axis.x,figcaption{grid-column:2}.axis.x{display:flex;justify-content:space-between}figcaption{color:#555}"
    "table{width:100%;border-collapse:collapse;table-layout:fixed}th{text-align:left}"
    "td,th{padding:3px 6px;border-bottom:1px solid #ddd;vertical-align:top;overflow-wrap:anywhere}"
)
_PLOT = 160  # a column chart's height, in pixels


def _section(title: str, content: str) -> str:
    return f"<section><h2>{html.escape(title)}</h2>{content}</section>"


def _bars(title: str, pairs: Sequence[tuple[str, float]], *, unit: str = "") -> str:
    """A horizontal bar chart: a bar a label, the labels whole (they wrap)."""
    if not pairs:
        return _section(title, "<p>nothing recorded</p>")
    top = max(value for _, value in pairs) or 1
    rows = []
    for label, value in pairs:
        shown = html.escape(label)
        rows.append(
            f'<span class="label" title="{shown}">{shown}</span><span class="track">'
            f'<span class="bar" style="width:{100 * value / top:.1f}%"></span></span>'
            f'<span class="value">{value:g}{unit}</span>'
        )
    return _section(title, f'<div class="bars" role="img" aria-label="{html.escape(title)}">{"".join(rows)}</div>')


def _columns(title: str, values: list[float], *, span: float, x: str, y: str) -> str:
    """A column chart (a time series or a histogram) over ``0..span`` of ``x``, with its axes' values."""
    if not values:
        return _section(title, "<p>nothing recorded</p>")
    top = max(values) or 1
    step = 100 / len(values)
    rects = []
    for i, value in enumerate(values):
        h = _PLOT * value / top
        tip = f"{_num(i * span / len(values))} to {_num((i + 1) * span / len(values))} {x}: {_num(value)} {y}"
        rects.append(
            f'<rect x="{i * step:.3f}%" y="{_PLOT - h:.1f}" width="{step * 0.9:.3f}%" height="{h:.1f}">'
            f"<title>{html.escape(tip)}</title></rect>"
        )
    y_ticks = "".join(f"<span>{_num(v)}</span>" for v in (top, top / 2, 0))
    x_ticks = "".join(f"<span>{_num(span * k / 4)}</span>" for k in range(5))
    figure = (
        f'<figure aria-label="{html.escape(title)}"><div class="axis y" style="height:{_PLOT}px">{y_ticks}</div>'
        f'<svg class="plot" width="100%" height="{_PLOT}" role="img" aria-label="{html.escape(title)}">'
        f'{"".join(rects)}<line x1="0" x2="100%" y1="{_PLOT}" y2="{_PLOT}" stroke="#999"/></svg>'
        f'<div class="axis x">{x_ticks}</div><figcaption>{html.escape(x)} &rarr;, {html.escape(y)} &uarr;</figcaption>'
        "</figure>"
    )
    return _section(title, figure)


def _num(value: float) -> str:
    return f"{value:.3g}"


def _latencies(records: list[Record]) -> list[float]:
    """Seconds from each download's start (``RequestScheduled``) to its response."""
    scheduled: dict[int, float] = {}
    latencies = []
    for record in records:
        if record["event"] == "RequestScheduled":
            scheduled[record["id"]] = record["t"]
        elif record["event"] == "ResponseDownloaded" and record.get("id") in scheduled:
            latencies.append(record["t"] - scheduled[record["id"]])
    return latencies


def _fetchers(records: list[Record], downloaded: list[Record]) -> list[str]:
    """The escalation ladder's sections: pages and CPU seconds per fetcher, and each host's moves."""
    pages = Counter(str(r["fetcher"]) for r in downloaded if r.get("fetcher"))
    moves = [r for r in records if r["event"] == "FetcherChanged"]
    if not pages and not moves:
        return []
    costs: dict[str, float] = {}
    for record in records:
        if record["event"] == "SpiderClosed":
            for name, value in (record.get("fetchers") or {}).items():
                fetcher, _, what = name.removeprefix("fetcher ").partition(" ")
                if what == "cpu ms":
                    costs[fetcher] = round(costs.get(fetcher, 0.0) + value / 1000, 2)
    rows = "".join(
        f"<tr><td>{r['t']:.1f} s</td><td>{html.escape(str(r.get('host')))}</td>"
        f"<td>{html.escape(str(r.get('previous')))} &rarr; {html.escape(str(r.get('fetcher')))}</td>"
        f"<td>{html.escape(str(r.get('reason')))}</td></tr>"
        for r in moves[:200]
    )
    table = _section(f"Hosts moved by the escalation ladder ({len(moves)})", f"<table>{rows}</table>") if moves else ""
    return [
        _bars("Pages per fetcher", sorted(pages.items())),
        _bars("CPU seconds per fetcher (estimated)", sorted(costs.items()), unit=" s"),
        table,
    ]


def _requests(counts: dict[str, Any]) -> str:
    """Where the requests ended, as a sentence."""
    reasons = ", ".join(f"{n} {reason}" for reason, n in counts["dropped_by_reason"].most_common())
    pending = f", {counts['requests_pending']} unfinished" if counts["requests_pending"] else ""
    return (
        f"{counts['requests_generated']} requests: {counts['requests_parsed']} parsed, "
        f"{counts['requests_failed']} failed, {counts['requests_dropped']} dropped"
        f"{f' ({reasons})' if reasons else ''}{pending}"
    )


def _saved_snapshots(records: list[Record]) -> dict[tuple[str, str], Path]:
    """The snapshots this crawl saved, by URL and reason: the trace's ``SpiderOpened`` line names their
    folder and the time the crawl opened (older runs' snapshots in the folder are not this crawl's)."""
    opened = next((r for r in records if r["event"] == "SpiderOpened" and r.get("snapshots")), None)
    if opened is None:
        return {}
    found: dict[tuple[str, str], Path] = {}
    for meta in sorted(Path(opened["snapshots"]).glob("*/snapshot.json")):  # by name: by time
        try:
            saved = json.loads(meta.read_text(encoding="utf-8"))
            url, reason, when = saved["request"]["url"], saved["reason"], saved["time"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a folder being written, or not a snapshot
        if when >= opened.get("since", 0):  # both times rounded to the millisecond
            found.setdefault((redact_url(str(url).partition("#")[0]), str(reason)), meta.parent)
    return found


def _failures(failed: list[Record], snapshots: dict[tuple[str, str], Path], limit: int = 100) -> str:
    """The failing URLs, whole (they wrap), with their reason and a link to the snapshot of each."""
    if not failed:
        return _section("Top failing URLs", "<p>nothing recorded</p>")
    counts = Counter((str(r.get("url", "")), str(r.get("reason"))) for r in failed)
    named = {(str(r.get("url", "")), str(r.get("reason"))): r["snapshot"] for r in failed if r.get("snapshot")}
    rows = []
    for (url, reason), times in counts.most_common(limit):
        folder = named.get((url, reason)) or snapshots.get((redact_url(url), reason))
        link = (
            f'<a class="snapshot" href="{Path(folder).resolve().as_uri()}" title="{html.escape(str(folder))}">'
            f"{html.escape(Path(folder).name)}</a>"
            if folder
            else "none"
        )
        shown = html.escape(url)
        rows.append(
            f'<tr><td class="url" title="{shown}">{shown}</td><td>{html.escape(reason)}</td>'
            f"<td>{times}</td><td>{link}</td></tr>"
        )
    more = f"<p>and {len(counts) - limit} more</p>" if len(counts) > limit else ""
    head = (
        '<colgroup><col style="width:52%"><col style="width:20%"><col style="width:6em"><col></colgroup>'
        "<tr><th>URL</th><th>reason</th><th>times</th><th>snapshot</th></tr>"
    )
    return _section("Top failing URLs", f'<table class="failures">{head}{"".join(rows)}</table>{more}')


def _monitors(results: Record | None) -> str:
    """The Monitors section: each monitor's verdict, from the run's results file (eclaw.monitors)."""
    if results is None:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(str(r.get('name')))}</td><td>{'ok' if r.get('ok') else '<b>FAILED</b>'}</td>"
        f"<td>{html.escape(str(r.get('message', '')))}</td></tr>"
        for r in results.get("results", [])
    )
    verdict = "all passed" if results.get("ok") else "some FAILED"
    return _section(f"Monitors ({verdict})", f"<table>{rows}</table>" if rows else "<p>no monitor</p>")


def render_report(records: list[Record], *, title: str = "eclaw crawl report", monitors: Record | None = None) -> str:
    """A self-contained HTML page (no scripts) summarising a trace: where requests ended, throughput,
    status codes, a latency histogram, failures by reason, domain and URL (each URL linked to its
    error snapshot when the crawl saved one), drops by reason, items by type, the escalation ladder;
    and the monitors' verdicts when ``monitors`` (the run's results file, read as JSON) is given."""
    downloaded = [r for r in records if r["event"] == "ResponseDownloaded"]
    failed = [r for r in records if r["event"] == "RequestFailed" and r.get("final", True)]
    stored = [r for r in records if r["event"] == "ItemStored"]
    end = max((r["t"] for r in records), default=0.0)
    per = max(end / 60, 0.05)  # about 60 columns, however long the crawl
    buckets = max(1, math.ceil(end / per))
    throughput = [0.0] * buckets
    for record in downloaded:
        throughput[min(buckets - 1, int(record["t"] / per))] += 1 / per
    latencies = _latencies(records)
    bins = 20
    slowest = max(latencies, default=0.0) or 1.0
    histogram = [0.0] * bins
    for value in latencies:
        histogram[min(bins - 1, int(value / slowest * bins))] += 1
    statuses = Counter(str(r.get("status")) for r in downloaded)
    reasons = Counter(str(r.get("reason")) for r in failed)
    domains = Counter(urlsplit(r.get("url", "")).hostname or "?" for r in failed)
    types = Counter(r.get("type", "?") for r in stored)
    counts = totals(records)
    summary = (
        f"{len(downloaded)} responses, {len(failed)} requests failed, {len(stored)} items stored "
        f"in {end:.1f} s ({len(downloaded) / max(end, 1e-9):.1f} responses/s)"
    )
    body = [
        f"<h1>{html.escape(title)}</h1><p>{html.escape(summary)}</p><p>{html.escape(_requests(counts))}</p>",
        _monitors(monitors),
        _columns("Throughput over time", throughput, span=buckets * per, x="seconds", y="responses/s"),
        _bars("Status codes", sorted(statuses.items())),
        _columns("Download latency", histogram, span=slowest, x="seconds", y=f"downloads (of {len(latencies)})"),
        _bars("Failures by reason", reasons.most_common(20)),
        _bars("Failing domains", domains.most_common(10)),
        _failures(failed, _saved_snapshots(records) if failed else {}),
        _bars("Requests dropped by reason", counts["dropped_by_reason"].most_common(10)),
        _bars("Items stored by type", types.most_common(20)),
        *_fetchers(records, downloaded),
    ]
    page = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body><main>{''.join(body)}</main></body></html>\n"
    )
    return redact_url(page)  # a trace eclaw wrote has none; one written before it redacted may
