"""Requests that submit an HTML form, or send JSON: what ``Request.from_form`` and ``Request.json`` build.

A form is submitted as a browser would submit it: every successful control is sent
(hidden inputs such as CSRF tokens included; ``disabled`` controls, unchecked boxes,
buttons and resets left out), with the form's ``action``, ``method`` and ``enctype``
(or the clicked button's ``formaction``/``formmethod``/``formenctype``), encoded in the
form's ``accept-charset`` or else the page's encoding. The semantics are Scrapy's
``FormRequest.from_response`` (``formdata``, ``formname``/``formid``/``formcss``/
``formxpath``/``formnumber``, ``clickdata``, ``dont_click``), with two differences: a
form selector that matches nothing is an error (Scrapy falls back to the first form),
and fields keep their place in the document when ``formdata`` overrides them.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit, urlunsplit

import lxml.html
from parsel.csstranslator import css2xpath

from eclaw.http.types import Page, RequestOptions

__all__ = ["FormData", "FormOptions", "RequestOptions", "Upload", "form_request", "json_request"]

logger = logging.getLogger(__name__)

R = TypeVar("R")  # the request class built (Request, or a subclass)


@dataclass(frozen=True, slots=True)
class Upload:
    """A file for a ``<input type="file">`` of a ``multipart/form-data`` form."""

    filename: str
    content: bytes = b""
    content_type: str = "application/octet-stream"


FieldValue = str | Upload
FormData = Mapping[str, FieldValue | Sequence[str] | None] | Iterable[tuple[str, FieldValue]]


class FormOptions(RequestOptions, total=False):
    """``Request.from_form``'s options: which form, which button, and the request's own."""

    formname: str
    formid: str
    formcss: str
    formxpath: str
    formnumber: int
    clickdata: Mapping[str, str | int]
    dont_click: bool
    method: str


_CLICKABLE = (
    'descendant::input[re:test(@type, "^(submit|image)$", "i")]'
    '|descendant::button[not(@type) or re:test(@type, "^submit$", "i")]'
)
_RE = {"re": "http://exslt.org/regular-expressions"}
_JSON_ACCEPT = "application/json, text/javascript, */*; q=0.01"


def form_request(
    cls: Callable[..., R],
    response: Page,
    formdata: FormData | None = None,
    *,
    formname: str | None = None,
    formid: str | None = None,
    formcss: str | None = None,
    formxpath: str | None = None,
    formnumber: int = 0,
    clickdata: Mapping[str, str | int] | None = None,
    dont_click: bool = False,
    method: str | None = None,
    **options: Any,
) -> R:
    """A request submitting a form of ``response`` (``Request.from_form``).

    Args:
        cls: the request class to build.
        response: the page holding the form.
        formdata: fields to set, over the form's own (a ``None`` value removes a field; a list
            sets a multi-valued one; an :class:`Upload` fills a file input).
        formname: the form's ``name`` attribute.
        formid: the form's ``id``.
        formcss: a CSS selector of the form or of an element inside it.
        formxpath: an XPath of the form or of an element inside it.
        formnumber: the form's index among the matches (all forms of the page by default).
        clickdata: attributes of the submit button to click (``{"name": "delete"}``), and/or
            ``"nr"``, its index among those matching; by default the first button is clicked.
        dont_click: submit without clicking any button.
        method: override the form's method.
        options: the request's own arguments (callback, meta, headers...).

    Raises:
        ValueError: no form matches, or no button matches ``clickdata``; ``formdata`` is neither a
            mapping nor an iterable of (name, value) pairs (as Scrapy's ``FormRequest``).
    """
    given = _pairs(formdata)
    form = _find_form(response, formname, formid, formcss, formxpath, formnumber)
    button = None if dont_click else _clicked(form, clickdata, response.url)
    values = _merged(_fields(form), button, given)
    action = (button.get("formaction") if button is not None else None) or form.get("action") or ""
    url = response.urljoin(action.strip()) if action.strip() else response.url
    verb = (method or (button.get("formmethod") if button is not None else None) or form.get("method") or "GET").upper()
    if method is None and verb not in ("GET", "POST"):
        verb = "GET"  # what a browser does with an unknown method (and "dialog": nothing to send)
    charset = _charset(form.get("accept-charset"), response.encoding)
    headers: dict[str, str] = {}
    if verb == "GET":
        parts = urlsplit(url)
        url = urlunsplit(parts._replace(query=_urlencoded(values, charset), fragment=""))
        body = b""
    else:
        kind = ((button.get("formenctype") if button is not None else None) or form.get("enctype") or "").lower()
        body, content_type = _encode(kind.strip(), values, charset)
        headers["Content-Type"] = content_type
    headers.update(options.pop("headers", None) or {})
    return cls(url, method=verb, body=body, headers=headers, **options)


def json_request(cls: Callable[..., R], url: str, data: Any = None, *, method: str | None = None, **options: Any) -> R:
    """A request sending ``data`` as JSON (``Request.json``): a POST with ``Content-Type:
    application/json`` (a GET without a body when ``data`` is ``None``), accepting JSON.

    Keys are sorted, so the same data is the same request to the duplicate filter.
    """
    headers = {"Accept": _JSON_ACCEPT}
    body = b""
    if data is not None:
        body = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        headers["Content-Type"] = "application/json"
    headers.update(options.pop("headers", None) or {})
    verb = method or ("POST" if data is not None else "GET")
    return cls(url, method=verb, body=body, headers=headers, **options)


# -- which form, which button ------------------------------------------------------------


def _find_form(
    response: Page,
    formname: str | None,
    formid: str | None,
    formcss: str | None,
    formxpath: str | None,
    formnumber: int,
) -> Any:
    document = _document(response)
    forms = document.xpath("//form")
    if not forms:
        raise ValueError(f"no <form> in {response.url}")
    what = "form"
    if formname is not None:
        forms, what = document.xpath("//form[@name=$v]", v=formname), f"form named {formname!r}"
    elif formid is not None:
        forms, what = document.xpath("//form[@id=$v]", v=formid), f"form with id {formid!r}"
    elif formcss is not None or formxpath is not None:
        query = css2xpath(formcss) if formcss is not None else str(formxpath)
        what = f"form at css {formcss!r}" if formcss is not None else f"form at xpath {formxpath!r}"
        forms = _unique(_enclosing_form(node) for node in document.xpath(query))
    if not forms:
        raise ValueError(f"no {what} in {response.url}")
    try:
        return forms[formnumber]
    except IndexError:
        raise ValueError(f"no form number {formnumber} ({len(forms)} {what}s) in {response.url}") from None


def _document(response: Page) -> Any:
    """The page as an ``lxml.html`` tree (whose forms know their fields); parsed for this
    request alone: a form is submitted once or twice per crawl, not once per page."""
    parser = lxml.html.HTMLParser(encoding="utf-8", recover=True)
    return lxml.html.document_fromstring(response.text.encode("utf-8") or b"<html/>", parser=parser)


def _enclosing_form(node: Any) -> Any:
    while node is not None and getattr(node, "tag", None) != "form":
        node = node.getparent()
    return node


def _unique(nodes: Iterable[Any]) -> list[Any]:
    found: list[Any] = []
    for node in nodes:
        if node is not None and all(node is not other for other in found):
            found.append(node)
    return found


def _clicked(form: Any, clickdata: Mapping[str, str | int] | None, url: str) -> Any:
    """The submit button clicked: the first (enabled) one, or the one ``clickdata`` describes."""
    buttons = [b for b in form.xpath(_CLICKABLE, namespaces=_RE) if b.get("disabled") is None]
    if clickdata is None:
        return buttons[0] if buttons else None
    wanted = {k: str(v) for k, v in clickdata.items() if k != "nr"}
    matches = [b for b in buttons if all(b.get(k) == v for k, v in wanted.items())]
    if "nr" in clickdata:
        try:
            return matches[int(clickdata["nr"])]
        except IndexError:
            raise ValueError(f"no submit button number {clickdata['nr']} matching {wanted} in {url}") from None
    if len(matches) != 1:
        count = "no" if not matches else f"{len(matches)}"
        raise ValueError(f"{count} submit buttons match clickdata {dict(clickdata)} in {url} (one needed; add 'nr')")
    return matches[0]


# -- the fields ---------------------------------------------------------------------------


def _fields(form: Any) -> list[tuple[str, FieldValue]]:
    """The form's successful controls in document order, as a browser submits them."""
    fields: list[tuple[str, FieldValue]] = []
    for element in form.inputs:
        name = element.name
        if not name or element.get("disabled") is not None or element.xpath("ancestor::fieldset[@disabled]"):
            continue
        if element.tag == "textarea":
            fields.append((name, element.value or ""))
        elif element.tag == "select":
            if element.multiple:
                fields.extend((name, value) for value in element.value)
            elif element.value is not None:
                fields.append((name, element.value))
        elif element.type == "file":
            fields.append((name, Upload("")))
        elif element.type not in ("submit", "image", "reset", "button") and (not element.checkable or element.checked):
            fields.append((name, element.value or ""))  # a checkbox without a value sends "on"
    return fields


def _pairs(formdata: FormData | None) -> list[tuple[str, Any]]:
    """``formdata`` as (name, value) pairs; a ``ValueError`` if it is neither a mapping nor an
    iterable of pairs (``formdata=123``)."""
    if formdata is None:
        return []
    if isinstance(formdata, Mapping):
        return list(formdata.items())
    if isinstance(formdata, str | bytes) or not isinstance(formdata, Iterable):
        raise ValueError(f"formdata must be a dict or (name, value) pairs, got {type(formdata).__name__}")
    pairs = list(formdata)
    for pair in pairs:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise ValueError(f"formdata must be a dict or (name, value) pairs, got the item {pair!r}")
    return [(key, value) for key, value in pairs]


def _merged(
    fields: list[tuple[str, FieldValue]], button: Any, formdata: list[tuple[str, Any]]
) -> list[tuple[str, FieldValue]]:
    """The form's fields with ``formdata`` set over them: a key keeps the place of its first
    field (its other fields go), new keys come last; the clicked button's name and value."""
    given: dict[str, list[FieldValue]] = {}
    for key, value in formdata:
        if value is None:
            given[key] = []
        elif isinstance(value, str | Upload):
            given.setdefault(key, []).append(value)
        else:
            given.setdefault(key, []).extend(value)
    if button is not None and button.get("name") and button.get("name") not in given:
        given[button.get("name")] = [button.get("value") or ""]
    merged: list[tuple[str, FieldValue]] = []
    placed: set[str] = set()
    for key, value in fields:
        if key not in given:
            merged.append((key, value))
        elif key not in placed:
            placed.add(key)
            merged.extend((key, v) for v in given[key])
    merged.extend((key, v) for key, values in given.items() if key not in placed for v in values)
    return merged


# -- encodings ----------------------------------------------------------------------------


def _charset(accept: str | None, page: str) -> str:
    """The form's ``accept-charset`` (its first known charset), else the page's encoding."""
    for name in (accept or "").replace(",", " ").split():
        try:
            return codecs.lookup(name).name
        except LookupError:
            continue
    return page


def _text(value: FieldValue) -> str:
    return value.filename if isinstance(value, Upload) else value


def _urlencoded(values: list[tuple[str, FieldValue]], charset: str) -> str:
    def encoded(text: str) -> bytes:
        return text.encode(charset, "xmlcharrefreplace")  # what the charset lacks goes as &#NNNN;, as browsers do

    return urlencode([(encoded(key), encoded(_text(value))) for key, value in values])


def _encode(enctype: str, values: list[tuple[str, FieldValue]], charset: str) -> tuple[bytes, str]:
    """The body and its ``Content-Type`` for ``enctype`` (urlencoded unless it names another)."""
    if enctype == "multipart/form-data":
        return _multipart(values, charset)
    if enctype == "text/plain":
        text = "".join(f"{k}={_text(v)}\r\n" for k, v in values)
        return text.encode(charset, "xmlcharrefreplace"), f"text/plain; charset={charset}"
    return _urlencoded(values, charset).encode("ascii"), "application/x-www-form-urlencoded"


def _multipart(values: list[tuple[str, FieldValue]], charset: str) -> tuple[bytes, str]:
    """RFC 7578 ``multipart/form-data``; the boundary is derived from the content, so the same
    submission is the same request (and no part can contain it by chance)."""
    parts = []
    for key, value in values:
        disposition = f'form-data; name="{_quoted(key)}"'
        if isinstance(value, Upload):
            head = f'{disposition}; filename="{_quoted(value.filename)}"\r\nContent-Type: {value.content_type}'
            content = value.content
        else:
            head, content = disposition, value.encode(charset, "xmlcharrefreplace")
        parts.append(b"Content-Disposition: " + head.encode(charset, "xmlcharrefreplace") + b"\r\n\r\n" + content)
    boundary = "----eclaw" + hashlib.sha1(b"\0".join(parts), usedforsecurity=False).hexdigest()
    marker = b"--" + boundary.encode("ascii")
    body = b"".join(marker + b"\r\n" + part + b"\r\n" for part in parts) + marker + b"--\r\n"
    return body, f"multipart/form-data; boundary={boundary}"


def _quoted(name: str) -> str:
    """A name in a ``Content-Disposition`` parameter, escaped as the HTML standard says."""
    return name.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
