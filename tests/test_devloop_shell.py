"""``eclaw shell`` driven through a pseudo-terminal, as a person types into it: Python's own console
(IPython made unimportable) and IPython's, against the Latin-1 library catalogue."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import struct
import sys
import termios
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from eclaw.testing import serve
from tests.devsite import Catalogue
from tests.test_devloop import BOOKS_SPIDER, spider_file

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")
_CURSOR_QUERY = b"\x1b[6n"  # prompt_toolkit asks where the cursor is; a terminal answers


class Terminal:
    """A command on a pty: ``send`` a line, ``expect`` text (escape sequences stripped)."""

    def __init__(self) -> None:
        self.output = b""
        self._seen = 0
        self._changed = asyncio.Event()
        self._master = -1
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, *args: str, cwd: Path, env: dict[str, str]) -> None:
        self._master, child = pty.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))  # no wrapped input lines
        self.process = await asyncio.create_subprocess_exec(
            *args, stdin=child, stdout=child, stderr=child, cwd=cwd, env=env
        )
        os.close(child)
        asyncio.get_running_loop().add_reader(self._master, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self._master, 65536)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self._master)
        if _CURSOR_QUERY in data:
            os.write(self._master, b"\x1b[1;1R")
        self.output += data
        self._changed.set()

    def text(self) -> str:
        return _ANSI.sub("", self.output.decode(errors="replace"))

    async def expect(self, wanted: str) -> str:
        """Wait (30 s at most) for ``wanted`` after what was already matched; returns the text up to it."""
        async with asyncio.timeout(30):
            while True:
                text = self.text()
                at = text.find(wanted, self._seen)
                if at >= 0:
                    chunk, self._seen = text[self._seen : at + len(wanted)], at + len(wanted)
                    return chunk
                self._changed.clear()
                await self._changed.wait()

    def send(self, line: str) -> None:
        os.write(self._master, line.encode() + b"\r")

    async def close(self) -> int:
        assert self.process is not None
        code = await asyncio.wait_for(self.process.wait(), 30)
        asyncio.get_running_loop().remove_reader(self._master)
        os.close(self._master)
        return code


@pytest.fixture
async def site() -> AsyncIterator[tuple[str, Catalogue]]:
    catalogue = Catalogue()
    async with serve(catalogue.app()) as base:
        yield base, catalogue


async def test_python_console_without_ipython(site: tuple[str, Catalogue], tmp_path: Path) -> None:
    base, catalogue = site
    blocker = tmp_path / "no-ipython"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['IPython'] = None  # not installed\n")
    agent = 'name = "books"\n        user_agent = "Librarian/1.0"'
    spider = spider_file(tmp_path, BOOKS_SPIDER.replace('name = "books"', agent))
    env = {**os.environ, "PYTHONPATH": str(blocker), "TERM": "xterm"}
    term = Terminal()
    command = [sys.executable, "-m", "eclaw", "shell", f"{base}/book/1", "--spider", spider]
    await term.start(*command, cwd=tmp_path, env=env)
    await term.expect(f"[eclaw] 200 {base}/book/1")
    await term.expect(">>> ")
    term.send('response.css("h1::text").get()')
    await term.expect("'Les Misérables'")  # decoded from ISO-8859-1
    term.send(f'fetch("{base}/book/2")')
    await term.expect(f"[eclaw] 200 {base}/book/2")
    term.send('response.css("dd.author::text").get(), request.url')
    await term.expect(f"('Thomas Mann', '{base}/book/2')")
    term.send("print(view())")
    viewed = Path((await term.expect(".html")).split("[eclaw] ")[-1].strip())
    body = viewed.read_bytes()  # noqa: ASYNC240 - a small file, after the shell wrote it
    viewed.unlink()  # noqa: ASYNC240
    assert f'<base href="{base}/book/2">'.encode() in body and "Der Zauberberg" in body.decode("latin-1")
    term.send('parse("parse_book").items')
    await term.expect("[{'title': 'Der Zauberberg', 'author': 'Thomas Mann', 'price': 14.0}]")
    term.send('fetch("not a url")')
    await term.expect("[eclaw] failed: malformed URL")
    term.send("exit()")
    assert await term.close() == 0
    assert "Traceback" not in term.text()
    assert catalogue.agents == ["Librarian/1.0", "Librarian/1.0"]  # the spider's UserAgent, both times


async def test_ipython_console_on_a_saved_page(tmp_path: Path) -> None:
    page = tmp_path / "shelf.html"
    page.write_text('<h1>Shelf 1</h1><a class="book" href="/book/7">Candide</a>')
    env = {**os.environ, "TERM": "xterm", "IPYTHONDIR": str(tmp_path / "ipython")}
    term = Terminal()
    command = [sys.executable, "-m", "eclaw", "shell", str(page), "-a", f"page={page.as_uri()}"]
    await term.start(*command, cwd=tmp_path, env=env)
    await term.expect("In [1]: ")
    term.send('response.css("h1::text").get(), response.url == spider.page')
    await term.expect("Out[1]: ('Shelf 1', True)")
    term.send("exit()")
    assert await term.close() == 0
