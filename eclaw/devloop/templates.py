"""``eclaw new``: a project folder, and spiders from templates (package data in ``templates/``).

Templates are ``string.Template`` files: ``${name}``, ``${class_name}``, ``${url}``,
``${domain}`` and ``${sitemap_url}`` are filled in.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from string import Template
from urllib.parse import urljoin, urlsplit

from eclaw.exceptions import ConfigError

__all__ = ["TEMPLATES", "new_project", "new_spider", "render_spider"]

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


def render_spider(name: str, url: str, template: str = "basic") -> str:
    """The source of a spider ``name`` for ``url`` from ``template`` (one of :data:`TEMPLATES`)."""
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
    return Template(_template(f"spider-{template}.py.tmpl")).substitute(values)


def new_spider(name: str, url: str, template: str = "basic", *, folder: str | Path = ".") -> Path:
    """Write ``NAME.py`` in ``folder/spiders`` (when there is one) or ``folder``; never over a file."""
    source = render_spider(name, url, template)
    base = Path(folder)
    target = (base / "spiders" if (base / "spiders").is_dir() else base) / f"{name}.py"
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
