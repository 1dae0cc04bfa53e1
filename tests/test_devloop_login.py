"""Log in once, then explore: ``eclaw fetch``, ``parse`` and ``shell`` send the cookies a paused
crawl kept in its ``--state`` folder, or those of a cookie file, so a members' page can be inspected."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from eclaw.cli.main import main
from eclaw.testing import serve
from tests.inprocess import eclaw_inprocess
from tests.sessionsite import Notebook
from tests.test_devloop import spider_file

MEMBER_SPIDER = """
    from eclaw import Request, Spider

    class Member(Spider):
        name = "member"

        def start_requests(self):
            yield Request(self.base + "/login")

        def parse(self, response):
            yield Request.from_form(response, {"user": "alice", "password": "wonderland"}, callback=self.notebook)

        def notebook(self, response):
            yield from response.follow_all(css="a.note", callback=self.note)

        def note(self, response):
            yield {"text": response.css(".text::text").get()}
            self.crawl.stop("paused after one note")  # as a Ctrl-C would: the state keeps the login
"""


@pytest.fixture
async def notebook() -> AsyncIterator[tuple[str, Notebook]]:
    site = Notebook(notes=3)
    async with serve(site.app()) as base:
        yield base, site


async def test_fetch_and_parse_with_the_state_of_a_paused_crawl_see_the_members_page(
    notebook: tuple[str, Notebook], tmp_path: Path
) -> None:
    base, site = notebook
    spider = spider_file(tmp_path, MEMBER_SPIDER, "member.py")
    state = str(tmp_path / "state")
    code, out, err = await eclaw_inprocess("crawl", spider, "-a", f"base={base}", "--state", state, "-o", "notes.jsonl")
    assert code == 0, err
    assert "crawl paused: state saved in" in out and site.logins == {"alice": 1}

    code, out, err = await eclaw_inprocess("fetch", f"{base}/notes", "--spider", spider, "--state", state)
    assert code == 0, err
    assert "alice's notebook" in out and f"200 {base}/notes" in out  # not sent back to /login
    code, out, err = await eclaw_inprocess("fetch", f"{base}/notes", "--state", state)  # no spider: the folder does
    assert code == 0, err
    assert "alice's notebook" in out
    code, out, err = await eclaw_inprocess("fetch", f"{base}/notes")
    assert code == 0, err
    assert "Sign in" in out and "alice's notebook" not in out  # without the session: the login form

    shell = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eclaw", "shell", f"{base}/notes", "--state", state, "--console", "python",
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    typed = b"print('who:', response.css('.who::text').get())\n"
    try:
        out_bytes, err_bytes = await asyncio.wait_for(shell.communicate(typed), 120)
    finally:  # timed out: not left running (its pipes would be reported unclosed in a later test)
        if shell.returncode is None:
            shell.kill()
            await shell.wait()
    assert shell.returncode == 0, err_bytes.decode()
    assert "who: alice" in out_bytes.decode() + err_bytes.decode()

    code, out, err = await eclaw_inprocess(
        "parse", f"{base}/notes", "--spider", spider, "--state", state, "-c", "notebook", "-d", "2"
    )
    assert code == 0, err
    assert out.count("(note)") == 3 and "alice's note 2" in out
    assert site.logins == {"alice": 1}  # no page needed a second login


async def test_fetch_with_a_netscape_cookie_file_or_a_json_one(notebook: tuple[str, Notebook], tmp_path: Path) -> None:
    base, site = notebook
    site.sessions["s3cr3t"] = "bob"  # a session bob's browser holds
    netscape = tmp_path / "cookies.txt"
    netscape.write_text("# Netscape HTTP Cookie File\n#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\tsid\ts3cr3t\n")
    code, out, err = await eclaw_inprocess("fetch", f"{base}/notes", "--cookies", str(netscape))
    assert code == 0, err
    assert "bob's notebook" in out
    playwright = tmp_path / "state.json"
    playwright.write_text(json.dumps({"cookies": [{"name": "sid", "value": "s3cr3t", "domain": "127.0.0.1"}]}))
    code, out, err = await eclaw_inprocess("fetch", f"{base}/note/bob/1", "--cookies", str(playwright))
    assert code == 0, err
    assert "bob's note 1" in out



async def test_login_runs_the_spiders_start_until_its_form_is_answered(
    notebook: tuple[str, Notebook], tmp_path: Path
) -> None:
    base, site = notebook
    spider = spider_file(tmp_path, MEMBER_SPIDER, "member.py")
    login = ("--spider", spider, "-a", f"base={base}", "--login")
    code, out, err = await eclaw_inprocess("fetch", f"{base}/notes", *login)
    assert code == 0, err
    assert "alice's notebook" in out and f"200 {base}/notes" in out
    assert site.logins == {"alice": 1}  # one login, then the page: the login crawl stopped at its answer
    code, out, err = await eclaw_inprocess(
        "parse", f"{base}/notes", "--spider", spider, "-a", f"base={base}", "--login", "-c", "notebook", "-d", "2"
    )
    assert code == 0, err
    assert out.count("(note)") == 3
    assert site.logins == {"alice": 2}
    assert not (tmp_path / "eclaw-data").exists()  # the login crawl wrote nothing: no store


async def test_login_of_a_spider_without_a_form_or_without_a_spider_is_one_line_and_exit_2(
    notebook: tuple[str, Notebook], tmp_path: Path
) -> None:
    base, _ = notebook
    formless = spider_file(tmp_path, """
    from eclaw import Spider

    class Reader(Spider):
        name = "reader"
        start_urls = []

        def parse(self, response):
            yield {"title": response.css("title::text").get()}
    """, "reader.py")  # fmt: skip
    code, _, err = await eclaw_inprocess("fetch", f"{base}/notes", "--spider", formless, "--login")
    assert code == 2
    assert err.strip().splitlines()[-1].endswith("it has no login to run; use --state or --cookies")
    code, _, err = await eclaw_inprocess("fetch", f"{base}/notes", "--login")
    assert code == 2 and "--login needs --spider FILE" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--state", "{tmp}/nowhere"], "no saved crawl there (no state.sqlite)"),
        (["--state", "{tmp}/done"], "no cookies (it finished, and a finished crawl keeps no cookie)"),
        (["--cookies", "{tmp}/missing.txt"], "--cookies {tmp}/missing.txt: cannot read it"),
        (["--cookies", "{tmp}/bad.json"], "not JSON"),
        (["--cookies", "{tmp}/bad.txt"], "not a Netscape cookies.txt"),
        (["--cookies", "{tmp}/nameless.json"], "each cookie needs a name and a value"),
        (["--state", "{tmp}/s", "--cookies", "{tmp}/bad.txt"], None),  # one or the other: argparse says so
    ],
)
def test_a_bad_saved_session_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], message: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "done").mkdir()
    with closing(sqlite3.connect(tmp_path / "done" / "state.sqlite")) as db, db:  # as a finished crawl leaves it
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.executemany("INSERT INTO meta VALUES (?, ?)", [("status", "finished"), ("outputs", "{}")])
    (tmp_path / "bad.json").write_text("{oops")
    (tmp_path / "bad.txt").write_text("sid=1\n")
    (tmp_path / "nameless.json").write_text('[{"value": "1", "domain": "a.test"}]')
    argv = ["fetch", "http://127.0.0.1:9/", *(a.replace("{tmp}", str(tmp_path)) for a in args)]
    if message is None:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
        return
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("eclaw: error: ") and err.count("\n") == 1
    assert message.replace("{tmp}", str(tmp_path)) in err
