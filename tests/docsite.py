"""A small documentation site, shaped like the Python docs Debian ships: a table of contents, a
general index and pages full of cross-references to ``#anchors``, in legacy 8-bit encodings.

The links are the same on every run; ``seed`` only shuffles their order on each page, so which
``#fragment`` reaches a page first changes from seed to seed. Extras: ``/whatsnew/changelog.html``
redirects to ``3.11.html#changelog`` (a ``Location`` with a fragment), and the index links a
removed module (``/library/distutils.html``), a 404.
"""

from __future__ import annotations

import html
import random

from aiohttp import web

DOC = "Python 3.11 documentation"

# path: (title, anchors, encoding); windows-1252 pages say so in the header, ISO-8859-1 ones only in <meta>
PAGES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "library/functions.html": ("Built-in Functions", ("abs", "all", "any", "bin", "open", "print"), "cp1252"),
    "library/os.html": ("os — Miscellaneous operating system interfaces", ("os.getcwd", "os.walk"), "cp1252"),
    "library/os.path.html": ("os.path — Common pathname manipulations", ("os.path.join", "os.path.split"), "cp1252"),
    "library/re.html": ("re — Regular expression operations", ("re.compile", "re.match", "re.sub"), "cp1252"),
    "library/json.html": ("json — JSON encoder and decoder", ("json.dumps", "json.loads"), "cp1252"),
    "library/asyncio-task.html": ("Coroutines and Tasks", ("asyncio.run", "asyncio.gather"), "cp1252"),
    "library/pathlib.html": ("pathlib — Object-oriented filesystem paths", ("pathlib.Path",), "cp1252"),
    "library/collections.html": ("collections — Container datatypes", ("collections.deque",), "cp1252"),
    "library/itertools.html": ("itertools — Functions creating iterators", ("itertools.chain",), "cp1252"),
    "library/functools.html": ("functools — Higher-order functions", ("functools.partial",), "cp1252"),
    "library/datetime.html": ("datetime — Basic date and time types", ("datetime.date",), "cp1252"),
    "library/stdtypes.html": ("Built-in Types", ("str.partition", "bytes.decode", "dict.get"), "cp1252"),
    "library/codecs.html": ("codecs — Codec registry and base classes", ("standard-encodings",), "cp1252"),
    "c-api/buffer.html": ("Buffer Protocol · C API", ("c.Py_buffer", "c.PyBuffer_Release"), "latin-1"),
    "c-api/object.html": ("Object Protocol · C API", ("c.PyObject_Repr", "c.PyObject_Str"), "latin-1"),
    "c-api/unicode.html": ("Unicode Objects and Codecs · C API", ("c.PyUnicode_FromString",), "latin-1"),
    "c-api/list.html": ("List Objects · C API", ("c.PyList_New", "c.PyList_Append"), "latin-1"),
    "c-api/dict.html": ("Dictionary Objects · C API", ("c.PyDict_GetItem",), "latin-1"),
    "c-api/exceptions.html": ("Exception Handling · C API", ("c.PyErr_SetString",), "latin-1"),
    "reference/datamodel.html": ("3. Data model", ("object.__init__", "object.__repr__", "object.__hash__"), "cp1252"),
    "reference/expressions.html": ("6. Expressions", ("grammar-token-python-grammar-atom",), "cp1252"),
    "reference/lexical_analysis.html": ("2. Lexical analysis", ("string-and-bytes-literals",), "cp1252"),
    "reference/import.html": ("5. The import system", ("importlib.abc.Loader",), "cp1252"),
    "tutorial/introduction.html": ("3. An Informal Introduction to Python", ("strings", "lists"), "latin-1"),
    "tutorial/controlflow.html": ("4. More Control Flow Tools", ("for-statements", "defining-functions"), "latin-1"),
    "tutorial/datastructures.html": ("5. Data Structures", ("more-on-lists", "dictionaries"), "latin-1"),
    "tutorial/errors.html": ("8. Errors and Exceptions", ("handling-exceptions",), "latin-1"),
    "howto/unicode.html": ("Unicode HOWTO · café, naïve, Größe", ("encodings", "the-string-type"), "latin-1"),
    "howto/regex.html": ("Regular Expression HOWTO", ("compiling-regular-expressions",), "latin-1"),
    "glossary.html": ("Glossary", ("term-iterable", "term-coroutine", "term-mapping"), "cp1252"),
    # no links to itself: a redirect's target is not in the duplicate filter, a link would fetch it again
    "whatsnew/3.11.html": ("What\u2019s New In Python 3.11", (), "cp1252"),
}
REDIRECT = ("whatsnew/changelog.html", "3.11.html#changelog")  # the only way to whatsnew/3.11.html
MISSING = "library/distutils.html"


def title(path: str) -> str:
    """The ``<title>`` of ``path``, as a browser shows it."""
    return f"{PAGES[path][0]} — {DOC}" if PAGES[path][2] == "cp1252" else f"{PAGES[path][0]} · {DOC}"


def _relative(source: str, target: str) -> str:
    """``target`` relative to the directory of ``source`` (both site paths), as Sphinx writes links."""
    folder, _, _ = source.rpartition("/")
    if folder and target.startswith(folder + "/"):
        return target[len(folder) + 1 :]
    return "../" * source.count("/") + target


def _references(path: str) -> list[str]:
    """The same cross-references on every run: four anchors on other pages, relative."""
    others = sorted(p for p in PAGES if p != path and PAGES[p][1])
    picks = random.Random(path).sample(others, 4)
    return [f"{_relative(path, p)}#{PAGES[p][1][-1]}" for p in picks]


def _html(page_title: str, body: str, encoding: str) -> bytes:
    meta = '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">' if encoding == "latin-1" else ""
    text = f"<!DOCTYPE html><html><head>{meta}<title>{html.escape(page_title)}</title></head><body>{body}</body></html>"
    return text.encode(encoding)


def _shuffled(hrefs: list[str], seed: int, where: str) -> list[str]:
    return random.Random(f"{seed}{where}").sample(hrefs, len(hrefs))


def _links(hrefs: list[str]) -> str:
    return "".join(f'<li><a class="reference internal" href="{html.escape(h)}">{h}</a></li>' for h in hrefs)


def toc(seed: int) -> list[str]:
    """The links of ``/index.html`` in the order ``seed`` serves them: each page by two of its anchors
    at most, the general index, the redirect and the removed module."""
    hrefs = [f"{p}#{a}" for p, (_, anchors, _) in PAGES.items() for a in anchors[:2]]
    hrefs += ["genindex.html", f"{REDIRECT[0]}#python-3-11-1", f"{MISSING}#distutils.core.setup"]
    return _shuffled(hrefs, seed, "/index.html")


def docs_app(seed: int) -> web.Application:
    """The site, every page's links in an order shuffled by ``seed``."""

    async def contents(request: web.Request) -> web.Response:
        if request.path == "/genindex.html":  # every anchor, by absolute path
            hrefs = [f"/{p}#{a}" for p, (_, anchors, _) in PAGES.items() for a in anchors]
            hrefs = _shuffled([*hrefs, f"/{MISSING}#module-distutils"], seed, request.path)
        else:
            hrefs = toc(seed)
        body = _html(f"Index — {DOC}", f"<h1>{DOC}</h1><ul>{_links(hrefs)}</ul>", "cp1252")
        return web.Response(body=body, content_type="text/html", charset="windows-1252")

    async def page(request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        if path == REDIRECT[0]:
            raise web.HTTPMovedPermanently(REDIRECT[1])
        if path not in PAGES:
            raise web.HTTPNotFound()
        name, anchors, encoding = PAGES[path]
        own = [f"#{a}" for a in anchors]  # Sphinx's ¶ permalinks next to every definition
        hrefs = [*own, *_references(path), _relative(path, "index.html"), _relative(path, "genindex.html")]
        defs = "".join(f'<dt id="{a}">{a}<a class="headerlink" href="#{a}">¶</a></dt>' for a in anchors)
        body = f"<h1>{html.escape(name)}</h1><dl>{defs}</dl><ul>{_links(_shuffled(hrefs, seed, path))}</ul>"
        charset = "windows-1252" if encoding == "cp1252" else None  # ISO-8859-1 pages declare it in <meta> only
        return web.Response(body=_html(title(path), body, encoding), content_type="text/html", charset=charset)

    app = web.Application()
    app.router.add_get("/index.html", contents)
    app.router.add_get("/genindex.html", contents)
    app.router.add_get("/{path:.+}", page)
    return app
