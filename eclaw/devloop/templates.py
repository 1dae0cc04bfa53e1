"""``eclaw new``: a project folder, and spiders from templates (package data in ``templates/``).

Templates are ``string.Template`` files: ``${name}``, ``${class_name}``, ``${url}``,
``${domain}`` and ``${sitemap_url}`` are filled in; the ``api`` template also gets what
:func:`guess_api` found on the API's first page (``${guess}``, ``${records_at}``, ``${next_at}``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any
from urllib.parse import urljoin, urlsplit

from eclaw.exceptions import ConfigError
from eclaw.http import Response

__all__ = ["TEMPLATES", "ApiGuess", "guess_api", "new_project", "new_spider", "render_spider", "spider_path"]

TEMPLATES = ("basic", "rules", "sitemap", "login", "api")
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_PROJECT = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
PROJECT_FILES = {  # file in the project: its template
    "pyproject.toml": "project-pyproject.toml.tmpl",
    "README.md": "project-README.md.tmpl",
    ".gitignore": "project-gitignore.tmpl",
    "tests/test_example.py": "project-test_example.py.tmpl",
    "tests/pages/example.html": "project-example.html",
}


def _template(name: str) -> str:
    return resources.files("eclaw.devloop").joinpath("templates", name).read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class ApiGuess:
    """Where the ``api`` template's spider found the records and the next page on a first page.

    Attributes:
        url: the page looked at.
        records_at: the key of the records (``""``: the page is the list), ``None`` if none was found.
        records: how many records that page has.
        next_at: where the next page's URL was (a key, or ``"Link"`` for the header), ``None`` if nowhere.
        tokens: values seen where a next page may be that are not URLs (not followed).
    """

    url: str
    records_at: str | None
    records: int
    next_at: str | None
    tokens: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """What was guessed, a line per finding: the comment in the spider, and what ``eclaw new`` prints."""
        if self.records_at is None:
            found = "records: no list found; every key of RECORDS is tried on each page (set records_at)"
        else:
            where = f"under {self.records_at!r}" if self.records_at else "the page itself (a list)"
            found = f"records: {where}, {self.records} on the first page"
        if self.next_at is None:
            follow = "next page: no URL on the first page; every place of NEXT is tried on each page"
        else:
            where = "in the Link header" if self.next_at == "Link" else f"under {self.next_at!r}"
            follow = f"next page: the URL {where}"
        return [found, follow] + [f"not followed: {token}" for token in self.tokens]


def guess_api(source: str, page: Response) -> ApiGuess:
    """Where the records and the next link of ``page`` are, found by the ``api`` spider ``source``'s
    own ``find_records`` and ``find_next``: what is guessed is what the spider does.

    Raises:
        ValueError: the page is not JSON.
    """
    spider: dict[str, Any] = {"__name__": "eclaw_api_template"}
    exec(compile(source, "<eclaw api template>", "exec"), spider)  # our own template's code
    data = page.json()
    place, records = spider["find_records"](data, spider["RECORDS"])
    found = isinstance(data, list) or bool(place)
    next_at, url, tokens = spider["find_next"](data, page.headers.getall("Link", []), spider["NEXT"])
    return ApiGuess(page.url, place if found else None, len(records), next_at if url else None, tuple(tokens))


def render_spider(name: str, url: str, template: str = "basic", *, guess: ApiGuess | None = None) -> str:
    """The source of a spider ``name`` for ``url`` from ``template`` (one of :data:`TEMPLATES`);
    for ``api``, ``guess`` pins where its records and next page are (else every place is tried)."""
    if not _NAME.fullmatch(name):
        raise ConfigError(f"spider name {name!r}: use lowercase letters, digits and _ (starting with a letter)")
    if template not in TEMPLATES:
        raise ConfigError(f"no template {template!r} (use {', '.join(TEMPLATES)})")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"URL {url!r}: expected an http(s) URL such as https://{url.split('://')[-1] or 'host'}/")
    sitemap = url if parts.path.endswith((".xml", ".xml.gz", "robots.txt")) else urljoin(url, "/sitemap.xml")
    class_name = "".join(part.capitalize() for part in name.split("_") if part) + "Spider"
    values = {"name": name, "class_name": class_name, "url": url, "domain": parts.hostname, "sitemap_url": sitemap}
    values.update(_api_values(guess))
    return Template(_template(f"spider-{template}.py.tmpl")).substitute(values)


def _api_values(guess: ApiGuess | None) -> dict[str, str]:
    """The ``api`` template's pinned places, and the comment saying what was guessed."""
    if guess is None:
        comment = "    # The API was not looked at when this file was made: every place is tried on each page."
        return {"guess": comment, "records_at": "RECORDS", "next_at": "NEXT"}
    lines = [f"    # What `eclaw new` found on {guess.url}:", *(f"    #   {line}" for line in guess.lines())]
    return {
        "guess": "\n".join(lines),
        "records_at": "RECORDS" if guess.records_at is None else f"({json.dumps(guess.records_at)},)",
        "next_at": "NEXT" if guess.next_at is None else f"({json.dumps(guess.next_at)},)",
    }


def spider_path(name: str, folder: str | Path = ".") -> Path:
    """Where ``eclaw new spider NAME`` writes: ``folder/spiders`` when there is one, else ``folder``."""
    base = Path(folder)
    return (base / "spiders" if (base / "spiders").is_dir() else base) / f"{name}.py"


def new_spider(
    name: str, url: str, template: str = "basic", *, folder: str | Path = ".", guess: ApiGuess | None = None
) -> Path:
    """Write ``NAME.py`` in ``folder/spiders`` (when there is one) or ``folder``; never over a file.
    ``guess`` is what the ``api`` template pins (see :func:`guess_api`)."""
    source = render_spider(name, url, template, guess=guess)
    target = spider_path(name, folder)
    _write(target, source)
    return target


def new_project(name: str, *, folder: str | Path = ".", url: str = "https://example.com/") -> Path:
    """A project ``folder/NAME``: pyproject, ``spiders/example.py``, a test on a saved page, a README."""
    if not _PROJECT.fullmatch(name):
        raise ConfigError(f"project name {name!r}: use letters, digits, _ and - (starting with a letter)")
    root = Path(folder) / name
    if root.exists():
        raise ConfigError(f"{root} already exists")
    spider = render_spider("example", url)
    for path, template in PROJECT_FILES.items():
        _write(root / path, Template(_template(template)).substitute(name=name, url=url))
    _write(root / "spiders" / "__init__.py", "")
    _write(root / "spiders" / "example.py", spider)
    return root


def _write(path: Path, text: str) -> None:
    if path.exists():
        raise ConfigError(f"{path} already exists: not overwritten")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from None
