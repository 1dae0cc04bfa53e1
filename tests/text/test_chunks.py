"""Chunks of markdown: cut at headings first, then between paragraphs, each at most ``max_chars``
long, each with its heading path (a real page's chunks: tests/text/test_extract.py)."""

from __future__ import annotations

import pytest

from eclaw.text import Chunk, chunk_markdown


def test_every_paragraph_is_in_a_chunk() -> None:
    paragraphs = [f"Paragraph {n}" + " word" * (20 + n % 7) for n in range(40)]
    markdown = "# Title\n\nIntro.\n\n## Part\n\n" + "\n\n".join(paragraphs)
    chunks = chunk_markdown(markdown, max_chars=400, overlap=0)
    assert chunks[0] == Chunk(text="# Title\n\nIntro.", headings=("Title",), index=0)
    joined = "\n\n".join(c.text for c in chunks[1:])
    assert joined == "## Part\n\n" + "\n\n".join(paragraphs)
    assert all(c.headings == ("Title", "Part") and len(c.text) <= 400 for c in chunks[1:])


def test_long_code_blocks_and_lines_are_cut_to_size() -> None:
    code = "```\n" + "\n".join(f"print({n})  # " + "x" * 40 for n in range(100)) + "\n```"
    markdown = f"## Code\n\n{code}\n\n" + "y" * 1500
    chunks = chunk_markdown(markdown, max_chars=500, overlap=50)
    assert all(len(c.text) <= 500 and c.headings == ("Code",) for c in chunks)
    assert "".join(c.text for c in chunks).count("print(") >= 100


def test_sections_that_are_only_a_heading_give_no_chunk() -> None:
    chunks = chunk_markdown("# A\n\n## B\n\ntext of b\n\n### C\n\n## D\n\ntext of d", max_chars=100, overlap=0)
    assert [(c.headings, c.text) for c in chunks] == [
        (("A", "B"), "## B\n\ntext of b"),
        (("A", "D"), "## D\n\ntext of d"),
    ]


def test_a_hash_inside_a_code_block_is_no_heading() -> None:
    chunks = chunk_markdown("# A\n\n```\n# a comment\n```\n\nafter", max_chars=100, overlap=0)
    assert len(chunks) == 1 and chunks[0].headings == ("A",)


@pytest.mark.parametrize(("max_chars", "overlap"), [(50, 0), (1000, 600), (1000, -1)])
def test_bad_sizes_are_refused(max_chars: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="chunks: "):
        chunk_markdown("# A\n\ntext", max_chars=max_chars, overlap=overlap)
