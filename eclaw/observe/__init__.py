"""Watching a crawl: log lines that name the request, the event trace and its report, metrics,
live progress, and the data-quality profile of each run."""
