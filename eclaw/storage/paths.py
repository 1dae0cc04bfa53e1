"""Output paths: the placeholders a path may hold, filled for one crawl."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from eclaw.exceptions import ConfigError

__all__ = ["fill_template", "resolve_path"]


def resolve_path(template: str | Path, spider: str, run_key: str, batch: int | None = None) -> Path:
    """``template`` with its placeholders filled."""
    return Path(fill_template(template, spider, run_key, batch))


def fill_template(template: str | Path, spider: str, run_key: str, batch: int | None = None) -> str:
    """``template`` (a path or a URL) with its placeholders filled."""
    text = str(template)
    try:
        text = text.format(spider=spider, run_key=run_key, date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"))
        if batch is not None:
            text = text % {"batch": batch}
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise ConfigError(
            f"bad output path {template}: placeholder {exc} (use {{spider}}, {{run_key}}, {{date}}, %(batch)05d)"
        ) from None
    return text
