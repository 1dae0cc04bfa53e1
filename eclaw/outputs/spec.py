"""Parsing an output spec (``-o items.jsonl.gz``, ``-:csv``, ``s3://b/k.csv?x=1``) into an
:class:`~eclaw.outputs.api.OutputSpec` (the syntax: :mod:`eclaw.outputs.api`)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from urllib.parse import parse_qsl, unquote, urlsplit

from eclaw.exceptions import ConfigError
from eclaw.outputs.api import DestinationFactory, ItemDestinationFactory, OutputSpec
from eclaw.outputs.registry import COMPRESSIONS, DESTINATIONS, FORMATS
from eclaw.security.redact import redact_url

__all__ = ["format_for_suffix", "parse_spec"]

_FORMAT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")  # two letters at least: not a Windows drive


def parse_spec(text: str) -> OutputSpec:
    """``text`` as an output spec; ConfigError naming the problem (unknown scheme, format, compression)."""
    text = str(text)
    if not text.strip():
        raise ConfigError("empty output spec (use a path, '-' for stdout, or a URL)")
    location, explicit = _split_format(text)
    options: dict[str, str] = {}
    if location in ("-", "stdout:") or (explicit and location == "stdout"):
        scheme, location = "stdout", "-"
    elif match := _URL.match(location):
        scheme = match.group(1).lower()
        parts = urlsplit(location)
        options = dict(parse_qsl(parts.query, keep_blank_values=True))
        location = parts._replace(query="", fragment="").geturl()
        if scheme == "file":
            location = unquote(parts.path)
    else:
        scheme = "file"
    factory = DESTINATIONS.get(scheme)
    if isinstance(factory, ItemDestinationFactory) and not isinstance(factory, DestinationFactory):
        if explicit:
            raise ConfigError(f"output {redact_url(text)}: {scheme}:// takes items whole, not a format (:{explicit})")
        return OutputSpec(text=text, scheme=scheme, location=location, format=None, options=options)
    if explicit:
        FORMATS.get(explicit)  # known, or a ConfigError listing the known ones
        fmt, compression = explicit, (_compression_of(location) if scheme != "stdout" else None)
    elif scheme == "stdout":
        fmt, compression = "jsonl", None
    else:
        fmt, compression = format_for_suffix(location, text)
    return OutputSpec(
        text=text,
        scheme=scheme,
        location=location,
        format=fmt,
        compression=compression,
        options=options,
        explicit_format=bool(explicit),
    )


def _split_format(text: str) -> tuple[str, str | None]:
    """``(location, FORMAT)`` from ``location:FORMAT``; ``(text, None)`` without one."""
    head, sep, tail = text.rpartition(":")
    named = sep and _FORMAT_NAME.fullmatch(tail) and not head.endswith(("/", ":"))
    if named and (len(head) > 1 or head == "-"):
        return head, tail.lower()
    return text, None


def _suffixes(location: str) -> list[str]:
    name = PurePosixPath(location.split("%(batch)")[-1] if "%(batch)" in location else location).name
    if "%(batch)" in location:
        name = "x" + re.sub(r"^[0-9]*d", "", name)  # the suffixes after %(batch)05d
    return [suffix.lower() for suffix in PurePosixPath(name).suffixes]


def _compression_of(location: str) -> str | None:
    suffixes = _suffixes(location)
    if suffixes and suffixes[-1][1:] in COMPRESSIONS:
        return suffixes[-1][1:]
    return None


def format_for_suffix(location: str, text: str | None = None) -> tuple[str, str | None]:
    """``(format, compression)`` for ``location``'s suffixes: a suffix a format claims itself first
    (``.warc.gz``), else a compression suffix and the format's suffix before it."""
    suffixes = _suffixes(location)
    guess = suffixes[-2][1:] if len(suffixes) >= 2 else ""
    if guess in FORMATS and "".join(suffixes[-2:]) in _claims(guess):  # .warc.gz: only its own format is asked
        return guess, None
    compression = None
    if suffixes and suffixes[-1][1:] in COMPRESSIONS:
        compression = suffixes.pop()[1:]
    if suffixes and (claimed := _claimed(suffixes[-1], suffixes[-1][1:])):
        return claimed, compression
    known = sorted({s for name in FORMATS.names() for s in _claims(name)})
    shown = "".join(suffixes[-1:]) or "(none)"
    raise ConfigError(
        f"unsupported output format {shown!r} for {redact_url(text or location)} (suffixes: {' '.join(known)};"
        f" or name one: PATH:FORMAT with FORMAT one of {', '.join(FORMATS.names())})"
    )


def _claims(name: str) -> tuple[str, ...]:
    try:
        return tuple(FORMATS.get(name).suffixes)
    except ConfigError:
        return ()


def _claimed(suffix: str, guess: str) -> str | None:
    """The format claiming ``suffix``: the one named ``guess`` first (loads one plug-in), else any."""
    if guess in FORMATS and suffix in _claims(guess):
        return guess
    for name in FORMATS.names():
        if suffix in _claims(name):
            return name
    return None
