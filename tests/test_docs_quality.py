"""The documentation site as a reader meets it: built with the project's own mkdocs (once per machine), its API
reference shows links or code where the docstrings have Sphinx roles, its tables keep setting names
whole and its code blocks scroll in a real Chromium, and no page names a module, class or setting
that does not exist."""

from __future__ import annotations

import builtins
import importlib
import inspect
import pkgutil
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import eclaw
import eclaw.middlewares
from eclaw import Settings
from tests.conftest import headless_chromium
from tests.sitebuild import BuildFailed, shared_site

if TYPE_CHECKING:
    from playwright.async_api import Route

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
RAW_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):(?:<code>|`)")

# Names of other projects' classes that the pages compare eclaw with (Scrapy, httpx, Crawlee, ...).
OTHER_PROJECTS = frozenset(
    {
        "CookiesMiddleware",
        "HeadBucket",  # S3's API call (docs/destinations.md)
        "AbstractResolver",  # aiohttp's (docs/performance.md)
        "CrawlSpider",
        "FormRequest",
        "ItemLoader",
        "LinkExtractor",
        "MockTransport",
        "OffsiteMiddleware",
        "PlaywrightCrawler",
        "RedirectMiddleware",
        "RefererMiddleware",
        "SameSite",
        "SitemapSpider",
        "VmHWM",
    }
)


@pytest.fixture(scope="module")
def site() -> Path:
    """The site, built exactly as ``make docs`` builds it (strict): once per machine and content, shared
    with the other Pythons' suites and ``make docs`` (tests/sitebuild.py); a failed build fails here."""
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        pytest.fail(f"{mkdocs} is missing: install the docs extra (pip install -e '.[docs]', or make docs)")
    try:
        return shared_site(mkdocs)
    except BuildFailed as exc:
        pytest.fail(str(exc), pytrace=False)


def test_sphinx_roles_in_docstrings_render_as_links_or_code(site: Path) -> None:
    raw = {
        str(page.relative_to(site)): RAW_ROLE.findall(page.read_text(encoding="utf-8")) for page in site.rglob("*.html")
    }
    assert {page: found for page, found in raw.items() if found} == {}
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    # :class:`ConnectError` in TLSError's docstring and :class:`Opens` in eclaw.contracts' resolve
    for anchor in ("eclaw.exceptions.ConnectError", "eclaw.contracts.Opens"):
        assert re.search(rf'<a class="autorefs[^"]*"[^>]*href="#{re.escape(anchor)}"><code>', api), anchor


# Per element in the page: setting names (inline code in table cells) and code blocks, measured.
MEASURE = """() => ({
  cells: [...document.querySelectorAll('.md-typeset td code')].filter(c => !/\\s/.test(c.textContent))
    .map(c => ({text: c.textContent, lines: new Set([...c.getClientRects()].map(r => Math.round(r.top))).size})),
  blocks: [...document.querySelectorAll('.md-typeset pre > code')].map(c => ({
    text: c.textContent.slice(0, 40), overflow: getComputedStyle(c).overflowX,
    wider: c.scrollWidth > c.clientWidth, right: c.getBoundingClientRect().right,
  })),
  page: document.documentElement.clientWidth,
  scrolls: document.documentElement.scrollWidth,
})"""


async def offline(route: Route) -> None:
    await route.abort()


async def test_setting_names_stay_whole_and_code_blocks_scroll_in_chromium(site: Path) -> None:
    pages = [site / "index.html", site / "reference" / "settings" / "index.html", site / "browser" / "index.html"]
    async with headless_chromium() as browser:
        for width in (390, 1280):
            for path in pages:
                page = await browser.new_page(viewport={"width": width, "height": 900})
                await page.route(re.compile(r"^https?://"), offline)  # the theme's web fonts: no internet
                await page.goto(path.as_uri())
                seen = await page.evaluate(MEASURE)
                await page.close()
                where = f"{path.relative_to(site)} at {width}px"
                broken = [cell["text"] for cell in seen["cells"] if cell["lines"] != 1]
                assert broken == [], f"{where}: names broken over lines: {broken}"
                assert seen["scrolls"] <= seen["page"], f"{where}: the page itself scrolls sideways"
                for block in seen["blocks"]:
                    assert block["right"] <= seen["page"] + 1, f"{where}: a code block runs off the page: {block}"
                    if block["wider"]:  # longer than its box: it must scroll, not be cut
                        assert block["overflow"] in ("auto", "scroll"), f"{where}: a code block is cut: {block}"
                if path == site / "index.html" and width == 390:  # the check above saw a block to scroll
                    assert any(block["wider"] for block in seen["blocks"]), seen["blocks"]


def eclaw_classes() -> dict[str, list[type]]:
    """Every class defined in eclaw (its modules and the built-in middlewares), by name."""
    classes: dict[str, list[type]] = {}
    for package in (eclaw, eclaw.middlewares):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            for name, value in vars(importlib.import_module(info.name)).items():
                if inspect.isclass(value) and value.__module__.startswith(("eclaw", "middlewares")):
                    classes.setdefault(name, []).append(value)
    return classes


def has_member(kind: type, name: str) -> bool:
    """Whether ``kind`` has ``name``: on the class, or set on its instances (``self.name = ...``)."""
    if hasattr(kind, name) or name in getattr(kind, "__annotations__", {}):
        return True
    return any(re.search(rf"\bself\.{name}\b", inspect.getsource(base)) for base in kind.__mro__[:-1])


def exists(dotted: str) -> bool:
    """Whether ``eclaw.x.y`` is a module, or an attribute of the longest module prefix of it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def entry_point_groups() -> set[str]:
    """The plug-in groups eclaw declares (``[project.entry-points."eclaw.formats"]`` in pyproject.toml)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return set(project.get("entry-points", {}))


def names(pattern: str) -> Iterator[tuple[str, str]]:
    """Each (page, name) that ``pattern``'s first group finds in the pages."""
    for page in PAGES:
        for name in re.findall(pattern, page.read_text(encoding="utf-8")):
            yield page.name, name


def settings_table_rows() -> Iterator[tuple[str, str]]:
    """The names in the first column of every table headed ``| setting |``."""
    for page in PAGES:
        in_table = False
        for line in page.read_text(encoding="utf-8").splitlines():
            in_table = line.startswith("| setting |") or (in_table and line.startswith("|"))
            if in_table and (name := re.match(r"\|\s*`(\w+)`", line)):
                yield page.name, name.group(1)


def test_docs_name_only_modules_classes_and_settings_that_exist() -> None:
    groups = entry_point_groups()  # `eclaw.formats` names a plug-in group, not a module
    named = names(r"\b(eclaw(?:\.\w+)+)")
    modules = sorted({found for found in named if found[1] not in groups and not exists(found[1])})
    assert modules == [], f"names of eclaw modules or objects that do not exist: {modules}"
    classes = eclaw_classes()
    known = set(classes) | set(dir(builtins)) | OTHER_PROJECTS
    unknown = sorted({found for found in names(r"`([A-Z][a-z0-9]+[A-Z]\w*)[`(.\[]") if found[1] not in known})
    assert unknown == [], f"class names that eclaw does not define (another project's? see OTHER_PROJECTS): {unknown}"
    members = [(page, name) for page, name in names(r"`([A-Z]\w*\.\w+)[`(\[ ]") if name.split(".")[0] in classes]
    assert len(members) > 10  # the pattern reads the pages' `Class.member` names
    gone = [
        (page, name)
        for page, name in members
        if not any(has_member(k, name.split(".")[1]) for k in classes[name.split(".")[0]])
    ]
    assert gone == [], f"members that eclaw's classes do not have: {gone}"
    settings = set(names(r"(?:-s|--set)\s+([a-z_]\w*)=")) | set(settings_table_rows())
    assert len(settings) > 20  # the pattern reads the pages' examples and tables
    stale = sorted(found for found in settings if found[1] not in Settings.names())
    assert stale == [], f"settings that do not exist: {stale}"


def test_a_build_is_shared_only_once_whole(tmp_path: Path) -> None:
    """tests/sitebuild.py on a one-page site: built once, then taken as it is; another content gets a
    build of its own; a failed build (a broken link, strict) raises mkdocs' error and leaves nothing."""
    mkdocs, root, cache = Path(sys.executable).parent / "mkdocs", tmp_path / "project", tmp_path / "cache"
    (root / "docs").mkdir(parents=True)
    (root / "mkdocs.yml").write_text("site_name: tiny\nstrict: true\n")
    (root / "docs" / "index.md").write_text("# Tiny\n")
    first = shared_site(mkdocs, root, cache)
    made = (first / "index.html").stat().st_mtime_ns
    assert shared_site(mkdocs, root, cache) == first and (first / "index.html").stat().st_mtime_ns == made
    (root / "docs" / "index.md").write_text("# Tiny\n\n[gone](missing.md)\n")
    with pytest.raises(BuildFailed, match=r"missing\.md"):
        shared_site(mkdocs, root, cache)
    assert sorted(path.name for path in cache.iterdir() if path.is_dir()) == [first.name]
