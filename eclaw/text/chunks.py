"""Cutting markdown into chunks for language models: at headings first, then between paragraphs.

A chunk never spans two sections (the text under one heading, down to the next heading at any
level), so every chunk has one heading path: the headings above it, outermost first
(``("4. More Control Flow Tools", "4.2. for Statements")``). A section longer than ``max_chars``
is cut between paragraphs (a code block counts as one paragraph; one longer than ``max_chars``
is cut between its lines, a line longer than that anywhere); each chunk after the first of a
section starts with the last ``overlap`` characters of the one before (from a word's start).
A section that is only a heading gives no chunk of its own: its title is in its children's paths.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Chunk", "chunk_markdown"]

_HEADING = re.compile(r"^(#{1,6}) +(.+?)\s*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    """One chunk: its markdown ``text``, its heading path, its place in the page."""

    text: str
    headings: tuple[str, ...]
    index: int

    def as_dict(self) -> dict[str, object]:
        """The chunk as a JSON-able dict."""
        return {"index": self.index, "headings": list(self.headings), "text": self.text}


def chunk_markdown(markdown: str, *, max_chars: int = 2000, overlap: int = 200) -> list[Chunk]:
    """``markdown`` in chunks of at most ``max_chars`` characters (see the module's docstring).

    Raises ValueError unless ``max_chars >= 100`` and ``0 <= overlap <= max_chars // 2``.
    """
    if max_chars < 100:
        raise ValueError(f"chunks: max_chars must be at least 100, not {max_chars}")
    if not 0 <= overlap <= max_chars // 2:
        raise ValueError(f"chunks: overlap must be between 0 and max_chars // 2 ({max_chars // 2}), not {overlap}")
    chunks: list[Chunk] = []
    for headings, text in _sections(markdown):
        for piece in _pack(text, max_chars, overlap):
            chunks.append(Chunk(text=piece, headings=headings, index=len(chunks)))
    return chunks


def _sections(markdown: str) -> Iterator[tuple[tuple[str, ...], str]]:
    """``(heading path, text)`` of each section with more than its heading (code blocks are no headings)."""
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    fenced = False

    def section() -> tuple[tuple[str, ...], str]:
        return tuple(title for _, title in path), "\n".join(lines).strip()

    for line in markdown.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match is not None:
            headings, text = section()
            if text and not ("\n" not in text and _HEADING.match(text)):
                yield headings, text
            level = len(match.group(1))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, match.group(2)))
            lines = []
        lines.append(line)
    headings, text = section()
    if text and not ("\n" not in text and _HEADING.match(text)):
        yield headings, text


def _pack(text: str, max_chars: int, overlap: int) -> Iterator[str]:
    """One section's chunks: its paragraphs packed greedily, the overlap in front of each but the first."""
    current = ""
    tail = ""
    for block in _blocks(text, max_chars - overlap - 2):
        joined = f"{current}\n\n{block}" if current else (f"{tail}\n\n{block}" if tail else block)
        if len(joined) <= max_chars:
            current = joined
            continue
        yield current
        tail = _tail(current, overlap)
        current = f"{tail}\n\n{block}" if tail else block
    if current:
        yield current


def _blocks(text: str, limit: int) -> Iterator[str]:
    """Paragraphs (a code block is one) of at most ``limit`` characters, longer ones cut by lines."""
    block: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if not line.strip() and not fenced:
            if block:
                yield from _cut("\n".join(block), limit)
            block = []
        else:
            block.append(line)
    if block:
        yield from _cut("\n".join(block), limit)


def _cut(block: str, limit: int) -> Iterator[str]:
    """``block`` whole if it fits, else cut between lines, a line longer than ``limit`` anywhere."""
    if len(block) <= limit:
        yield block
        return
    piece = ""
    for line in block.splitlines():
        while len(line) > limit:
            if piece:
                yield piece
                piece = ""
            yield line[:limit]
            line = line[limit:]
        if piece and len(piece) + 1 + len(line) > limit:
            yield piece
            piece = line
        else:
            piece = f"{piece}\n{line}" if piece else line
    if piece:
        yield piece


def _tail(text: str, overlap: int) -> str:
    """The last ``overlap`` characters of ``text``, from the start of a word when there is one."""
    if overlap == 0:
        return ""
    tail = text[-overlap:]
    space = re.search(r"\s", tail)
    if space is not None and space.end() < len(tail) and len(tail) == overlap:
        tail = tail[space.end() :]
    return tail.strip()
