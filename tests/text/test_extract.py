"""``response.markdown()`` and ``response.main_text()`` on real pages: the Python documentation
(Debian's python3-doc) served by a local server, and a few pages of our own."""

from __future__ import annotations

import itertools
import re
import sys

import pytest

from eclaw.exceptions import ConfigError, NotTextResponse
from eclaw.text import extract_page
from tests.text.site import get

pytestmark = pytest.mark.asyncio(loop_scope="module")

BOILERPLATE = ("Table of Contents", "Previous topic", "Next topic", "Report a Bug", "Show Source",
               "Quick search", "Navigation", "Copyright", "Python Software Foundation", "Last updated")  # fmt: skip


HEADING = re.compile(r"^(#{1,6}) (.+)$")


def heading_paths(markdown: str) -> list[tuple[str, ...]]:
    """The heading path of every heading, in order (code blocks skipped)."""
    paths: list[tuple[int, str]] = []
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and (match := HEADING.match(line)):
            level = len(match.group(1))
            paths = [(lvl, text) for lvl, text in paths if lvl < level] + [(level, match.group(2))]
            found.append(tuple(text for _, text in paths))
    return found


def heading_lines(text: str) -> list[str]:
    fenced, found = False, []
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and HEADING.match(line):
            found.append(line)
    return found


async def test_chunks_of_a_tutorial_page(base: str) -> None:
    markdown = (await get(f"{base}/docs/tutorial/controlflow.html")).markdown()
    chunks = markdown.chunks(max_chars=1200, overlap=150)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert all(len(c.text) <= 1200 for c in chunks)
    known = set(heading_paths(markdown))
    assert {c.headings for c in chunks} <= known
    assert ("4. More Control Flow Tools", "4.8. More on Defining Functions", "4.8.1. Default Argument Values") in {
        c.headings for c in chunks
    }
    for chunk in chunks:  # a heading is only ever a section's first line: chunks never span two
        found = heading_lines(chunk.text)
        assert len(found) <= 1, chunk.text
        if found:
            assert chunk.text.startswith(found[0]) and found[0].endswith(" " + chunk.headings[-1])
    text = re.sub(r"\s+", " ", markdown)
    for before, after in itertools.pairwise(chunks):
        shared = overlap(before.text, after.text)
        assert shared <= 150
        if before.headings == after.headings:  # within a section, the overlap repeats
            assert shared > 0 and after.text[shared : shared + 2] == "\n\n"
        assert re.sub(r"\s+", " ", after.text[shared:].strip()) in text  # nothing invented


def overlap(before: str, after: str) -> int:
    """The length of the longest end of ``before`` that ``after`` starts with."""
    return max((k for k in range(1, min(len(before), len(after)) + 1) if before.endswith(after[:k])), default=0)


def fences_balanced(markdown: str) -> bool:
    return sum(line.startswith("```") for line in markdown.splitlines()) % 2 == 0


async def test_tutorial_page_keeps_headings_code_and_lists_drops_the_sidebar(base: str) -> None:
    response = await get(f"{base}/docs/tutorial/controlflow.html")
    markdown = response.markdown()
    assert markdown.page_title == "4. More Control Flow Tools" and markdown.language == "en"
    assert markdown.url == response.url
    assert markdown.startswith("# 4. More Control Flow Tools\n")
    headings = [line for line in markdown.splitlines() if line.startswith("#")]
    assert "## 4.1. `if` Statements" in headings and "## 4.2. `for` Statements" in headings
    assert "### 4.8.1. Default Argument Values" in headings
    assert '```\n>>> x = int(input("Please enter an integer: "))\n' in markdown  # a code block, its lines kept
    assert fences_balanced(markdown)
    assert re.search(r"^- Like unpacking assignments, tuple and list patterns", markdown, re.M)  # a list item
    assert "¶" not in markdown  # permalink marks
    for text in BOILERPLATE:
        assert text not in markdown, text
    assert response.markdown() is markdown  # extracted once per response


async def test_definition_lists_keep_their_code_blocks(base: str) -> None:
    markdown = (await get(f"{base}/docs/library/fnmatch.html")).markdown()
    assert "fnmatch.fnmatch(*filename*, *pattern*)" in markdown
    assert "```\nimport fnmatch\nimport os\nfor file in os.listdir('.'):\n" in markdown


async def test_tables_become_markdown_tables(base: str) -> None:
    markdown = (await get(f"{base}/docs/library/fnmatch.html")).markdown()
    assert re.search(r"^\| Pattern \| Meaning \|", markdown, re.M)
    assert re.search(r"^\|---\|---\|", markdown, re.M)
    assert re.search(r"^\| `\[!seq\]` \| matches any character not in \*seq\* \|", markdown, re.M)


async def test_main_text_is_plain(base: str) -> None:
    response = await get(f"{base}/docs/tutorial/appetite.html")
    text = response.main_text()
    assert text.startswith("1. Whetting Your Appetite")
    assert "the high-level data types allow you to express complex operations in a single statement" in text
    assert "#" not in text.splitlines()[0] and "```" not in text
    for word in BOILERPLATE:
        assert word not in text


async def test_non_utf8_pages_by_header_and_by_meta(base: str) -> None:
    for path in ("/latin1.html", "/latin1-meta.html"):
        response = await get(base + path)
        markdown = response.markdown()
        assert markdown.page_title == "Café crème", path
        assert markdown.language == "fr"
        assert "Une tasse de café crème coûte trois euros à Noël, déjà payée." in markdown
        assert "Accueil" not in markdown  # its nav


async def test_a_page_without_main_content(base: str) -> None:
    response = await get(f"{base}/empty.html")
    markdown = response.markdown()
    assert markdown == "" and markdown.page_title == "Nothing here" and markdown.language is None
    assert response.main_text() == "" and markdown.chunks() == []


async def test_binary_pages_are_refused(base: str) -> None:
    response = await get(f"{base}/file.pdf")
    with pytest.raises(NotTextResponse):
        response.markdown()


async def test_huge_pages_are_cut(base: str) -> None:
    response = await get(f"{base}/docs/tutorial/controlflow.html")
    whole = extract_page(response)
    cut = extract_page(response, max_chars=20_000)
    assert cut.truncated and not whole.truncated
    assert cut.title == whole.title and 0 < len(cut.markdown) < len(whole.markdown) // 2


async def test_a_clear_error_without_trafilatura(base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    response = await get(f"{base}/docs/tutorial/appetite.html")
    monkeypatch.setitem(sys.modules, "trafilatura", None)  # import trafilatura raises ImportError
    with pytest.raises(ConfigError, match=r"^text extraction needs trafilatura: pip install 'eclaw\[text\]'$"):
        response.markdown()
