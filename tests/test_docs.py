"""Every Python block in docs/*.md runs as written.

Each block is executed as a module of its own, in a fresh working directory; a block
that defines ``async def example()`` (no parameters) is then awaited: that is where a
page's example starts its own local site (``eclaw.testing``), crawls it and checks
what it promises. Blocks never touch the internet.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"


def blocks() -> list[tuple[str, int, str]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"```python\n(.*?)```", text, re.S):
            line = text.count("\n", 0, match.start()) + 2
            found.append((str(page.relative_to(DOCS)), line, match.group(1)))
    return found


@pytest.mark.parametrize(("page", "line", "code"), [pytest.param(*b, id=f"{b[0]}:{b[1]}") for b in blocks()])
async def test_python_block_runs(page: str, line: int, code: str) -> None:
    name = re.sub(r"\W", "_", page)
    module = types.ModuleType(f"docs_{name}_{line}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    try:
        exec(compile("\n" * (line - 1) + code, str(DOCS / page), "exec"), module.__dict__)
        example = module.__dict__.get("example")
        if inspect.iscoroutinefunction(example):
            await example()
    finally:
        sys.modules.pop(module.__name__, None)


def test_every_fence_is_closed() -> None:
    for page in sorted(DOCS.rglob("*.md")):
        fences = [line for line in page.read_text(encoding="utf-8").splitlines() if line.lstrip().startswith("```")]
        assert len(fences) % 2 == 0, f"{page.name}: a code block is not closed"


def test_every_page_is_in_the_navigation() -> None:
    """A page missing from mkdocs.yml's ``nav`` is built but reachable from nowhere."""
    nav = (DOCS.parent / "mkdocs.yml").read_text(encoding="utf-8").partition("\nnav:")[2]
    listed = set(re.findall(r":\s*(\S+\.md)\s*$", nav, re.M))
    orphans = sorted(page.name for page in DOCS.glob("*.md") if page.name not in listed)
    assert orphans == [], f"pages missing from mkdocs.yml's nav: {orphans}"
