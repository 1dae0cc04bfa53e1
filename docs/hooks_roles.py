"""A Griffe extension, loaded by mkdocstrings (``mkdocs.yml``), that turns the Sphinx-style roles of
eclaw's docstrings (``:class:`~eclaw.x.Y```, ``:func:``, ``:meth:``, ``:mod:``, ``:data:``,
``:attr:``, ``:exc:``, ``:obj:``) into cross-references at build time, so the docstrings stay as
they are and the API reference shows links, never raw roles.

A target on the API reference becomes a link; any other (a private module, the standard library)
becomes inline code: the cross-reference is *optional*, so a strict build does not fail on it.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

# :class:`Y`, :py:meth:`~a.b.c`, :func:`title <a.b.c>`; the target may start with "." or "~".
ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const)"
    r":`(?:(?P<title>[^`<]+?)\s*<(?P<aim>[^`>]+)>|(?P<target>[^`]+))`"
)


def scopes(obj: griffe.Object) -> list[griffe.Object]:
    """Where a relative name is looked up, innermost first: the object's class(es), then its module."""
    chain: list[griffe.Object] = []
    current: griffe.Object | None = obj if obj.is_class or obj.is_module else obj.parent
    while current is not None:
        chain.append(current)
        current = current.parent if not current.is_module else None
    return chain


def resolve(path: str, obj: griffe.Object) -> str:
    """The full path of ``path`` as written in ``obj``'s docstring (``.name``, ``Name.attr`` or a full path)."""
    head, _, rest = path.lstrip(".").partition(".")
    for place in scopes(obj):
        member = place.members.get(head)
        if member is not None:  # an imported name points at its definition
            found = member.target_path if isinstance(member, griffe.Alias) else member.path
            return f"{found}.{rest}" if rest else found
    return path.lstrip(".")


def autoref(match: re.Match[str], obj: griffe.Object) -> str:
    """One role as an optional cross-reference; its text is the name as Sphinx would show it."""
    target = (match["aim"] or match["target"]).strip()
    path = target.lstrip("~").removesuffix("()")
    title = match["title"] or (path.rsplit(".", 1)[-1] if target.startswith("~") else path.lstrip("."))
    identifier = html.escape(resolve(path, obj))
    return f'<autoref identifier="{identifier}" optional><code>{html.escape(title)}</code></autoref>'


def rewrite(text: str, obj: griffe.Object) -> str:
    """``text`` with every Sphinx role replaced by a cross-reference."""
    return ROLE.sub(lambda match: autoref(match, obj), text)


class SphinxRoles(griffe.Extension):
    """Rewrites the roles in every docstring of a package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Walk the package's own objects (aliases are rewritten where they are defined)."""
        todo: list[griffe.Object] = [pkg]
        while todo:
            obj = todo.pop()
            if obj.docstring is not None:
                obj.docstring.value = rewrite(obj.docstring.value, obj)
            todo.extend(member for member in obj.members.values() if not isinstance(member, griffe.Alias))
