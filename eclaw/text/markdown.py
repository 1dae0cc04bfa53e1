"""Markdown as trafilatura writes it, tidied; :class:`Markdown`, a ``str`` that knows its page.

Tidying: the permalink marks documentation generators put after headings (``¶``) are dropped,
inline code that spans lines (rendered as a fence in the middle of a sentence) is put back
inline, and a blank line separates every code block from the text around it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eclaw.text.chunks import Chunk

__all__ = ["Markdown", "clean_markdown", "clean_title"]

_PERMALINKS = " \t¶🔗"
_HEADING = re.compile(r"^(#{1,6}) +(.*?)[ \t¶🔗]*$")
# a fence opened after text on the same line: multi-line inline <code>, not a code block
_INLINE_FENCE = re.compile(
    r"^(?!\s*```)([^\n]*\S) ?```\n([^`]*?)\n```(?:(?P<tight>\n)(?=[,.;:!?)\]])|(?P<loose>\n)|$)", re.MULTILINE
)


class Markdown(str):
    """A page's main content as markdown (a ``str``), with the page's ``url``, ``page_title``
    (``title`` is ``str.title()``) and ``language``; :meth:`chunks` cuts it for a language
    model's context or an embedding index."""

    url: str
    page_title: str
    language: str | None

    def __new__(cls, text: str = "", *, url: str = "", title: str = "", language: str | None = None) -> Markdown:
        obj = super().__new__(cls, text)
        obj.url, obj.page_title, obj.language = url, title, language
        return obj

    def chunks(self, max_chars: int = 2000, overlap: int = 200) -> list[Chunk]:
        """The markdown in chunks of at most ``max_chars`` characters, cut at headings first, then
        between paragraphs; each chunk after the first of a section repeats the last ``overlap``
        characters of the one before. See :func:`eclaw.text.chunks.chunk_markdown`."""
        from eclaw.text.chunks import chunk_markdown

        return chunk_markdown(self, max_chars=max_chars, overlap=overlap)


def clean_title(title: str) -> str:
    """A title without surrounding space and permalink marks."""
    return " ".join(title.split()).rstrip(_PERMALINKS).strip()


def clean_markdown(text: str) -> str:
    """trafilatura's markdown, tidied (see the module's docstring)."""
    text = _INLINE_FENCE.sub(_inline, text)
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        fence = line.lstrip().startswith(("```", "~~~"))
        if fence and not fenced and lines and lines[-1].strip():
            lines.append("")  # a blank line before a code block
        if not fence and not fenced and lines and lines[-1].lstrip().startswith(("```", "~~~")) and line.strip():
            lines.append("")  # and after it
        if not fenced and (match := _HEADING.match(line)):
            line = f"{match.group(1)} {match.group(2)}"
        if fence:
            fenced = not fenced
        lines.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _inline(match: re.Match[str]) -> str:
    """``text ```\\ncode\\n```\\n`` back to ``text `code` `` (the code's lines joined by spaces)."""
    code = " ".join(match.group(2).split())
    return f"{match.group(1)} `{code}`" + (" " if match.group("loose") else "")
