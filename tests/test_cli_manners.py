"""The command line's manners: the last line of a crawl says how many items each output holds,
``-q`` prints warnings and errors only, and every command's ``--help`` says what each option means."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from eclaw.cli.main import main, parser
from tests.conftest import read_jsonl
from tests.inprocess import eclaw_inprocess as eclaw  # the CLI run in this process, its output captured
from tests.test_cli import SHOP
from tests.test_devloop import spider_file

WARNER = """
    from eclaw import Request, Spider

    class Warner(Spider):
        name = "warner"

        def start_requests(self):
            yield Request(self.base + "/")

        def parse(self, response):
            self.logger.warning("the shop looks odd today")
            yield {"url": response.url}
"""


async def test_the_last_line_counts_the_items_written_to_each_output(demo_url: str) -> None:
    code, out, err = await eclaw("crawl", SHOP, "-a", f"base_url={demo_url}", "-o", "items.jsonl", "-o", "items.csv")
    assert code == 0, err
    assert out.splitlines()[-1] == "wrote 500 items to items.jsonl, 500 to items.csv"
    assert len(read_jsonl("items.jsonl")) == 500


async def test_quiet_prints_warnings_and_errors_only(demo_url: str, tmp_path: Path) -> None:
    spider = spider_file(tmp_path, WARNER, "warner.py")
    # -q wins over a log level set with -s (an explicit --log-level would win over -q)
    args = ("crawl", spider, "-a", f"base={demo_url}", "-s", "log_level=INFO", "-o", "out.jsonl")
    code, out, err = await eclaw(*args, "-q")
    assert code == 0, err
    assert out.splitlines()[-1] == "wrote 1 item to out.jsonl"  # the results are still printed, on stdout
    assert "WARNING" in err and "the shop looks odd today" in err
    assert not [line for line in err.splitlines() if " INFO " in line]
    assert len(read_jsonl("out.jsonl")) == 1  # and the crawl did its work
    code, out, err = await eclaw(*args)
    assert code == 0, err
    assert " INFO " in err  # without -q, the INFO lines as before


def _commands(command: argparse.ArgumentParser, path: list[str]) -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    """Every command and subcommand of the command line, with its words (``["new", "spider"]``)."""
    yield path, command
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, [*path, name])


COMMANDS = list(_commands(parser(), []))


@pytest.mark.parametrize(("words", "command"), COMMANDS, ids=[" ".join(w) or "eclaw" for w, _ in COMMANDS])
def test_every_commands_help_gives_each_option_a_meaning(
    words: list[str], command: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main([*words, "--help"])
    assert done.value.code == 0
    shown = _squeezed(capsys.readouterr().out)
    for action in command._actions:
        name = "/".join(action.option_strings) or action.dest
        if isinstance(action, argparse._SubParsersAction):
            for sub in action._choices_actions:  # each subcommand listed with its meaning
                assert sub.help and _squeezed(sub.dest + sub.help) in shown, sub.dest
            continue
        assert action.help and action.help != argparse.SUPPRESS, f"eclaw {' '.join(words)}: {name} has no help"
        assert _squeezed(action.help % vars(action)) in shown, name


def _squeezed(text: str) -> str:
    """``text`` without its spaces (argparse wraps lines at spaces and hyphens)."""
    return re.sub(r"\s+", "", text)
