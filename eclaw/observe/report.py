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


def _bars(title: str, pairs: Sequence[tuple[str, float]], *, unit: str = "", width: int = 640) -> str:
    """A horizontal bar chart as inline SVG."""
    if not pairs:
        return f"<h2>{html.escape(title)}</h2><p>nothing recorded</p>"
    top = max(value for _, value in pairs) or 1
    row, label_w = 22, 260
    parts = [f'<svg width="{width}" height="{row * len(pairs) + 10}" role="img" aria-label="{html.escape(title)}">']
    for i, (label, value) in enumerate(pairs):
        y = i * row + 5
        w = (width - label_w - 80) * value / top
        parts.append(f'<text x="{label_w - 8}" y="{y + 14}" text-anchor="end">{html.escape(label[:40])}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{row - 6}" fill="#4c78a8"/>')
        parts.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 14}">{value:g}{unit}</text>')
    parts.append("</svg>")
    return f"<h2>{html.escape(title)}</h2>" + "".join(parts)


def _columns(title: str, values: list[float], *, label: str, width: int = 640, height: int = 160) -> str:
    """A column chart (a time series or a histogram) as inline SVG."""
    if not values:
        return f"<h2>{html.escape(title)}</h2><p>nothing recorded</p>"
    top = max(values) or 1
    step = width / len(values)
    parts = [f'<svg width="{width}" height="{height + 20}" role="img" aria-label="{html.escape(title)}">']
    for i, value in enumerate(values):
        h = height * value / top
        x, y = i * step, height - h
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(step - 1, 1):.1f}" height="{h:.1f}" fill="#f58518"/>')
    parts.append(f'<text x="0" y="{height + 16}">{html.escape(label)} (max {top:g})</text></svg>')
    return f"<h2>{html.escape(title)}</h2>" + "".join(parts)


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
    table = f"<h2>Hosts moved by the escalation ladder ({len(moves)})</h2><table>{rows}</table>" if moves else ""
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


def render_report(records: list[Record], *, title: str = "eclaw crawl report") -> str:
    """A self-contained HTML page (inline SVG charts, no scripts) summarising a trace."""
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
    domains = Counter(urlsplit(r.get("url", "")).hostname or "?" for r in failed)
    failing = Counter(f"{r.get('url', '')} ({r.get('reason')})" for r in failed)
    types = Counter(r.get("type", "?") for r in stored)
    counts = totals(records)
    summary = (
        f"{len(downloaded)} responses, {len(failed)} requests failed, {len(stored)} items stored "
        f"in {end:.1f} s ({len(downloaded) / max(end, 1e-9):.1f} responses/s)"
    )
    body = [
        f"<h1>{html.escape(title)}</h1><p>{html.escape(summary)}</p><p>{html.escape(_requests(counts))}</p>",
        _columns("Throughput over time", throughput, label=f"responses/s, {per:.2g} s per column, {end:.1f} s in all"),
        _bars("Status codes", sorted(statuses.items())),
        _columns(
            "Download latency",
            histogram,
            label=f"{len(latencies)} downloads, 0 to {slowest:.3f} s in {bins} bins",
        ),
        _bars("Failing domains", domains.most_common(10)),
        _bars("Top failing URLs", failing.most_common(10)),
        _bars("Requests dropped by reason", counts["dropped_by_reason"].most_common(10)),
        _bars("Items stored by type", types.most_common(20)),
        *_fetchers(records, downloaded),
    ]
    style = (
        "body{font-family:system-ui,sans-serif;margin:2em;max-width:760px}"
        "svg text{font-size:12px;fill:#333}h2{font-size:1.1em;margin-top:1.6em}"
    )
    page = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n"
    )
    return redact_url(page)  # a trace eclaw wrote has none; one written before it redacted may
