"""What ``eclaw shell`` puts in the hands of its user: ``response``, ``request``, ``fetch()``,
``view()``, ``parse()``, the spider, its settings and middlewares.

The console is synchronous (Python's ``code`` module, or IPython); the downloads run
on an event loop in a thread of its own, where the session's aiohttp client lives,
so ``fetch(url)`` is a plain call that returns when the page is in.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from eclaw.devloop.callback import Outputs, resolve_callback, run_callback
from eclaw.devloop.session import Session
from eclaw.exceptions import EclawError, IgnoreRequest
from eclaw.http import Request, Response

__all__ = ["Console"]

T = TypeVar("T")
_HEAD = re.compile(rb"<head[^>]*>", re.I)

HELP = """\
[eclaw] response    the page ({response})
[eclaw] request     its request
[eclaw] fetch(url_or_request)   download through the spider's middlewares; sets response and request
[eclaw] view(response)          write the body to a temp file (links work) and print its path
[eclaw] parse(callback=None)    run the spider's callback (by name) on response: .items, .requests
[eclaw] spider, settings, middlewares, Request, Response; shelp() shows this again"""


class Console:
    """A :class:`Session` driven from synchronous code, and the shell's namespace around it."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.namespace: dict[str, Any] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="eclaw-shell-loop", daemon=True)

    def __enter__(self) -> Console:
        self._thread.start()
        try:
            self._run(self.session.__aenter__())
        except BaseException:
            self._stop()
            raise
        self.namespace.update(
            response=None,
            request=None,
            fetch=self.fetch,
            view=self.view,
            parse=self.parse,
            shelp=self.shelp,
            spider=self.session.spider,
            settings=self.session.settings,
            middlewares=self.session.middlewares,
            Request=Request,
            Response=Response,
        )
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._run(self.session.close())
        finally:
            self._stop()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def show(self, response: Response) -> None:
        """Make ``response`` the shell's page."""
        self.namespace["response"], self.namespace["request"] = response, response.request

    def fetch(self, target: str | Request) -> Response | None:
        """Download ``target`` (a URL or a ``Request``) through the spider's middlewares; it becomes ``response``."""
        try:
            request = target if isinstance(target, Request) else Request(target)
            response = self._run(self.session.fetch(request))
        except IgnoreRequest as exc:
            print(f"[eclaw] dropped: {exc.reason}")
            return None
        except EclawError as exc:  # a download error, a malformed URL: one line, the session goes on
            print(f"[eclaw] failed: {exc}")
            return None
        self.show(response)
        print(f"[eclaw] {response.status} {response.url} ({len(response.body)} bytes)")
        return response

    def view(self, response: Response | None = None) -> Path | None:
        """Write the body to a temporary file (a ``<base>`` added so its links and images work) and print its path."""
        page = response if response is not None else self.namespace.get("response")
        if page is None:
            print("[eclaw] no response to view: fetch(url) first")
            return None
        body = page.body
        suffix = ".html" if page.is_text and b"<" in body[:1024] else ".bin"
        if suffix == ".html" and not re.search(rb"<base[\s>]", body[:4096], re.I):
            base = f'<base href="{page.url}">'.encode()
            body = _HEAD.sub(lambda m: m.group(0) + base, body, count=1) if _HEAD.search(body) else base + body
        with tempfile.NamedTemporaryFile("wb", prefix="eclaw-", suffix=suffix, delete=False) as out:
            out.write(body)
        path = Path(out.name)
        print(f"[eclaw] {path}")
        return path

    def parse(self, callback: str | None = None) -> Outputs | None:
        """Run the spider's callback (``callback`` by name, else the request's, else ``parse``) on ``response``."""
        page: Response | None = self.namespace.get("response")
        if page is None:
            print("[eclaw] no response to parse: fetch(url) first")
            return None
        if callback is not None:
            try:
                page.request.callback = resolve_callback(self.session.spider, callback)
            except EclawError as exc:
                print(f"[eclaw] {exc}")
                return None
        outputs = self._run(run_callback(self.session.spider, page))
        print(f"[eclaw] {len(outputs.items)} items, {len(outputs.requests)} requests")
        return outputs

    def shelp(self) -> None:
        """What the shell offers."""
        page = self.namespace.get("response")
        print(HELP.format(response=page if page is not None else "none yet: fetch(url)"))
