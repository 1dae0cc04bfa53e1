"""Text for language models: a page's main content as markdown or plain text, its title and
language (:mod:`eclaw.text.extract`, trafilatura: ``pip install 'eclaw[text]'``), chunks cut at
headings (:mod:`eclaw.text.chunks`), and the markdown outputs ``-o pages:markdown`` (a ``.md``
file per page) and ``-o pages.md.jsonl`` (a row per page) in :mod:`eclaw.text.output`.

In a callback: ``response.markdown()`` (a :class:`Markdown`: ``.title``, ``.language``,
``.chunks()``) and ``response.main_text()``.
"""

from __future__ import annotations

from eclaw.text.chunks import Chunk, chunk_markdown
from eclaw.text.extract import MAX_HTML_CHARS, Page, extract_page, is_html
from eclaw.text.markdown import Markdown

__all__ = ["MAX_HTML_CHARS", "Chunk", "Markdown", "Page", "chunk_markdown", "extract_page", "is_html"]
