"""``eclaw shell [URL | FILE.html | SNAPSHOT]``: an interactive session on a page, with the spider's
settings and middlewares (``--spider``): IPython when installed (``eclaw[shell]``), else Python's own."""

from __future__ import annotations

import argparse
import code
from pathlib import Path
from typing import Any

from eclaw.cli.common import setup_logging
from eclaw.cli.oneoff import add_spider_options, checked_url, session_of
from eclaw.devloop.console import Console
from eclaw.devloop.session import saved_page
from eclaw.exceptions import ConfigError
from eclaw.http import Response
from eclaw.observe.snapshots import load_snapshot

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    shell = sub.add_parser("shell", help="an interactive session on a page: response, fetch(), view()")
    shell.add_argument("page", nargs="?", default=None, help="a URL, a saved page (FILE.html) or a snapshot folder")
    add_spider_options(shell)
    shell.add_argument(
        "--console", choices=["auto", "ipython", "python"], default="auto", help="auto: IPython if installed"
    )


def run(args: argparse.Namespace) -> int:
    url, saved = _page(args.page)
    ipython = _ipython() if args.console != "python" else None
    if args.console == "ipython" and ipython is None:
        raise ConfigError("--console ipython: IPython is not installed (pip install 'eclaw[shell]')")
    session = session_of(args)
    setup_logging("WARNING")
    with Console(session) as console:
        if saved is not None:
            console.show(saved)
        elif url:
            console.fetch(url)
        console.shelp()
        if ipython is not None:
            ipython(banner1="", user_ns=console.namespace, exit_msg="")()
        else:
            code.interact(banner="", local=console.namespace, exitmsg="")
    return 0


def _page(page: str | None) -> tuple[str, Response | None]:
    """The URL to fetch, or the saved page (a file, a snapshot folder) to open."""
    if page is None:
        return "", None
    path = Path(page)
    if path.is_dir():
        if not (path / "snapshot.json").is_file():
            raise ConfigError(f"{page} is a folder but not a snapshot (no snapshot.json)")
        return "", load_snapshot(path)
    if path.is_file():
        return "", saved_page(path)
    if "://" not in page and page.endswith((".html", ".htm", ".json", ".xml")):
        raise ConfigError(f"no file {page}")
    return checked_url(page), None


def _ipython() -> Any:
    """IPython's embeddable shell, or ``None`` when IPython is not installed."""
    try:
        from IPython.terminal.embed import InteractiveShellEmbed
    except ImportError:
        return None
    return InteractiveShellEmbed
