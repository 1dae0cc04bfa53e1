"""Generates the reference pages at build time (mkdocs-gen-files): the command line from the
argparse parser, the settings from ``eclaw.Settings`` itself. No second, hand-kept table."""

from __future__ import annotations

import argparse
import dataclasses
import re

import mkdocs_gen_files

from eclaw.cli.main import parser
from eclaw.settings import Settings


def cli_page() -> str:
    root = parser()
    lines = ["# Command-line reference", "", "Generated from the `eclaw` command's own parser.", ""]
    commands = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        lines += [f"## eclaw {name}", "", "```", sub.format_help().strip(), "```", ""]
    return "\n".join(lines)


def setting_docs() -> dict[str, str]:
    """Each setting's description, from the ``Attributes:`` section of ``Settings``' docstring."""
    docs: dict[str, str] = {}
    current = ""
    for line in (Settings.__doc__ or "").splitlines():
        match = re.match(r"^        (\w+): (.*)$", line)
        if match and match.group(1) in Settings.names():
            current = match.group(1)
            docs[current] = match.group(2)
        elif current and line.startswith("            "):
            docs[current] += " " + line.strip()
        else:
            current = ""
    return docs


def settings_page() -> str:
    docs = setting_docs()
    lines = [
        "# Settings reference",
        "",
        "Generated from `eclaw.Settings`. Set with `-s KEY=VALUE`, `custom_settings`, `Settings(...)` or",
        "`ECLAW_<KEY>`; see [Settings](../settings.md) for the order in which they apply.",
        "",
        "| setting | type | default | meaning |",
        "|---|---|---|---|",
    ]
    hints = {f.name: f.type for f in dataclasses.fields(Settings)}
    for field in dataclasses.fields(Settings):
        default, kind, meaning = (
            text.replace("|", "\\|") for text in (repr(field.default), str(hints[field.name]), docs.get(field.name, ""))
        )
        lines.append(f"| `{field.name}` | `{kind}` | `{default}` | {meaning} |")
    return "\n".join(lines) + "\n"


API = """# API reference

The public API: `from eclaw import ...`, the events, the exceptions, what a plug-in implements,
the built-in middlewares and the test helpers.

::: eclaw
    options:
      members: [run, Engine, Spider, Request, Response, Settings, Stats]

::: eclaw.events

::: eclaw.exceptions

::: eclaw.contracts

::: eclaw.items

::: eclaw.middlewares

::: eclaw.testing
"""

PAGES = {"reference/cli.md": cli_page(), "reference/settings.md": settings_page(), "reference/api.md": API}
for path, text in PAGES.items():
    with mkdocs_gen_files.open(path, "w") as page:
        page.write(text)
