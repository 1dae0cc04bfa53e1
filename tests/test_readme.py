"""The README's example runs as written, against a local copy of the quotes site."""

from __future__ import annotations

import re
from pathlib import Path

from eclaw.testing import collect, serve
from tests.conftest import assert_accounted
from tests.test_doc_examples import execute
from tests.test_example_spiders import quotes_site

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def test_the_readme_has_one_python_block_the_ten_line_spider() -> None:
    assert len(BLOCKS) == 1 and "class QuotesSpider" in BLOCKS[0]
    assert len([line for line in BLOCKS[0].splitlines() if line.strip()]) <= 10


async def test_ten_line_spider() -> None:
    async with serve(quotes_site()) as base:
        items, stats = await collect(execute(BLOCKS[0])["QuotesSpider"], start_urls=[base + "/"])
    assert len(items) == 5 and items[0]["author"] == "Albert Einstein"
    assert_accounted(stats)
