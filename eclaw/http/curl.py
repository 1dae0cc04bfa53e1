"""``Request.to_curl()`` and ``Request.from_curl()``: a request as a curl command, and back.

``from_curl`` reads what a browser's "Copy as cURL" gives: the URL, ``-X``, ``-H``,
``-d``/``--data``/``--data-raw``/``--data-binary``/``--data-ascii`` (joined with ``&``, and a
POST unless ``-X`` says otherwise), ``-b``/``--cookie``, ``-u``/``--user``, ``-A``, ``-e``
and ``-I``; options that change nothing eclaw sends (``--compressed``, ``-L``, ``-s``,
``-k``...) are ignored, and any other option is a ``ValueError`` naming it (or, with
``ignore_unknown_options=True``, a warning). ``to_curl`` writes what the request carries,
its credentials included (the user asked for them); the crawl's own headers (its
``User-Agent``...) are added by the fetcher and are not in it.
"""

from __future__ import annotations

import argparse
import base64
import logging
import shlex
from collections.abc import Callable
from typing import Any, NoReturn, Protocol, TypeVar

__all__ = ["request_from_curl", "to_curl"]

logger = logging.getLogger(__name__)

R = TypeVar("R")


class Sent(Protocol):
    """What ``to_curl`` reads of a request (:class:`eclaw.Request`; this module does not import it)."""

    url: str
    method: str
    body: bytes

    @property
    def headers(self) -> dict[str, str]: ...

    @property
    def meta(self) -> dict[str, Any]: ...


# Options curl takes that change nothing in what eclaw would send: read and ignored.
_IGNORED_FLAGS = (
    ("--compressed",), ("-L", "--location"), ("-s", "--silent"), ("-S", "--show-error"), ("-k", "--insecure"),
    ("-i", "--include"), ("-v", "--verbose"), ("-g", "--globoff"), ("--http1.1",), ("--http2",),
    ("-f", "--fail"), ("-N", "--no-buffer"),
)  # fmt: skip


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(f"curl command: {message}")


def _parser() -> _Parser:
    parser = _Parser(prog="curl", add_help=False, allow_abbrev=False)
    parser.add_argument("url", nargs="?")
    parser.add_argument("--url", dest="url_option")
    parser.add_argument("-X", "--request", dest="method")
    parser.add_argument("-H", "--header", dest="headers", action="append", default=[])
    for name in ("-d", "--data", "--data-raw", "--data-binary", "--data-ascii"):
        parser.add_argument(name, dest="data", action="append", default=[])
    parser.add_argument("-b", "--cookie", dest="cookies", action="append", default=[])
    parser.add_argument("-u", "--user")
    parser.add_argument("-A", "--user-agent")
    parser.add_argument("-e", "--referer")
    parser.add_argument("-I", "--head", action="store_true")
    for flags in _IGNORED_FLAGS:
        parser.add_argument(*flags, action="store_true", dest=f"ignored_{flags[-1].lstrip('-')}")
    return parser


def request_from_curl(cls: Callable[..., R], command: str, ignore_unknown_options: bool = False, **kwargs: Any) -> R:
    """The request ``command`` (a curl command line) would send, as a ``cls``; ``kwargs`` are the
    request's other arguments (``callback``, ``meta``...) and win over the command's."""
    try:
        argv = shlex.split(command.replace("\\\r\n", " ").replace("\\\n", " "))
    except ValueError as exc:
        raise ValueError(f"curl command: cannot split it as a shell would ({exc})") from None
    if argv[:1] == ["curl"]:
        argv = argv[1:]
    args, unknown = _parser().parse_known_args(argv)
    if unknown:
        if not ignore_unknown_options:
            raise ValueError(f"curl command: unsupported options: {' '.join(unknown)}")
        logger.warning("curl command: unsupported options ignored: %s", " ".join(unknown))
    url = args.url_option or args.url
    if not url:
        raise ValueError("curl command: no URL")
    if "://" not in url:
        url = "http://" + url  # as curl does
    headers: dict[str, str] = {}
    for header in args.headers:
        name, colon, value = header.partition(":")
        if not colon or not name.strip():
            raise ValueError(f"curl command: header {header!r} is not 'Name: value'")
        headers[name.strip()] = value.strip()
    if args.user_agent is not None:
        headers["User-Agent"] = args.user_agent
    if args.referer is not None:
        headers["Referer"] = args.referer
    if args.user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(args.user.encode()).decode("ascii")
    body = "&".join(args.data)
    method = args.method or ("HEAD" if args.head else "POST" if args.data else "GET")
    if args.data and not any(name.lower() == "content-type" for name in headers):
        headers["Content-Type"] = "application/x-www-form-urlencoded"  # what curl sends with -d
    options: dict[str, Any] = {"method": method, "headers": headers, "body": body, "cookies": _cookies(args.cookies)}
    options.update(kwargs)
    return cls(url, **options)


def _cookies(values: list[str]) -> dict[str, str]:
    cookies: dict[str, str] = {}
    for value in values:
        if "=" not in value:
            raise ValueError(f"curl command: -b {value!r} names a cookie file: give the cookies (-b 'name=value')")
        for pair in value.split(";"):
            name, _, cookie = pair.strip().partition("=")
            if name:
                cookies[name] = cookie
    return cookies


def to_curl(request: Sent) -> str:
    """A curl command sending what ``request`` carries: method, URL, headers (credentials
    included), cookies and body."""
    parts = ["curl"]
    if request.method != "GET" or request.body:
        parts += ["-X", request.method]
    parts.append(shlex.quote(request.url))
    for name, value in request.headers.items():
        parts += ["-H", shlex.quote(f"{name}: {value}")]
    cookies = request.meta.get("cookies")
    if cookies:
        parts += ["-b", shlex.quote("; ".join(f"{name}={value}" for name, value in dict(cookies).items()))]
    if request.body:
        try:
            body = request.body.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(
                f"{request!r}: its body is not text; save it to a file and send it with --data-binary @FILE"
            ) from None
        parts += ["--data-raw", shlex.quote(body)]
    return " ".join(parts)
