"""Fallback static file server for the benchmark when nginx is missing."""

from __future__ import annotations

import sys
from pathlib import Path

from aiohttp import web


def main() -> None:
    root, port = Path(sys.argv[1]), int(sys.argv[2])
    app = web.Application()
    app.router.add_static("/", root)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


if __name__ == "__main__":
    main()
