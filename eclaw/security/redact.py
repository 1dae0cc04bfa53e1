"""The one redaction boundary: what every writer of eclaw (logs, files of record, snapshots, trace,
report, recordings, state, Redis, metrics) passes its text and records through.

A :class:`Redactor` is built once per crawl from its settings and spider (:meth:`Redactor.for_spider`);
it knows the sensitive header names (:func:`eclaw.security.headers.sensitive_headers`) and the secret
values of the crawl: ``http_auth`` passwords (setting and spider), proxy passwords (``proxies`` setting,
``HTTP(S)_PROXY``/``ALL_PROXY``, a request's ``meta["proxy"]``) and secret spider arguments. Whatever it
redacts shows as ``***``, so a reader still sees that a value was there.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from eclaw.security.headers import ALWAYS_SENSITIVE, sensitive_headers

if TYPE_CHECKING:
    from eclaw.settings import Settings

__all__ = ["MASK", "SECRET_ARG_WORDS", "Redactor", "is_secret_arg", "redact_url"]

MASK = "***"
# An argument whose name holds one of these (any case) is secret unless the spider says nothing else.
SECRET_ARG_WORDS = ("password", "passwd", "pass", "token", "secret", "key", "api_key", "apikey", "auth", "credential")
_MIN_SECRET = 4  # shorter values are not searched for in text: they would mask half of every line
_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^/@:\s]*):[^/@\s]*@")
# Keys of records (a request's meta) that hold credentials whatever their value looks like.
# A header's value in free text: an auth scheme and its token, or cookies up to the end of the list.
_VALUE = r"(?:(?:Bearer|Basic|Digest|Token|Negotiate)\s+)?[^\s'\",;]+(?:;\s*[^\s'\",;]+)*"
# Response headers that are credentials too when written (a server's session cookie).
_RESPONSE_SENSITIVE = frozenset({"set-cookie"})
_SECRET_KEYS = frozenset({"cookies", "http_auth", "proxy_auth", "password", "passwd", "token", "secret"})


def redact_url(text: str) -> str:
    """``text`` with the passwords of URLs in it replaced by ``***`` (needs no crawl: the URL rule alone)."""
    return _USERINFO.sub(rf"\1:{MASK}@", text) if "@" in text else text


def is_secret_arg(name: str, declared: Iterable[str] = ()) -> bool:
    """Whether the spider argument ``name`` is secret: ``declared`` by the spider (``secret_args``),
    or a name that looks like one (holds a word of :data:`SECRET_ARG_WORDS`, any case)."""
    lowered = name.lower()
    return name in declared or any(word in lowered for word in SECRET_ARG_WORDS)


class Redactor:
    """Redacts text, URLs, header mappings and JSON-able records for one crawl.

    Args:
        headers: lower-case names of the sensitive headers (their values are always masked).
        secrets: values that must never be written (passwords, tokens); each is masked wherever it
            appears in text, also percent-encoded, and as the base64 of a ``user:password`` pair.
        secret_args: the names of the spider's secret arguments (declared ones; names that look
            secret are too).
    """

    def __init__(
        self, *, headers: Iterable[str] = ALWAYS_SENSITIVE, secrets: Iterable[str] = (), secret_args: Iterable[str] = ()
    ) -> None:
        self.headers = frozenset(h.lower() for h in headers) | _RESPONSE_SENSITIVE
        self.secret_args = tuple(secret_args)
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        names = "|".join(re.escape(h) for h in sorted(self.headers, key=len, reverse=True))
        # "Authorization: Bearer x", "'cookie': 'sid=x'", "authorization=x" in free text (reprs, tracebacks)
        self._header_text = re.compile(rf"(?i)(\b(?:{names})\b['\"]?\s*[:=]\s*['\"]?){_VALUE}")
        self.learn(*secrets)

    def __repr__(self) -> str:
        return f"Redactor({len(self.headers)} headers, {len(self._values)} secret forms)"

    @classmethod
    def for_spider(cls, settings: Settings, spider: Any, args: Mapping[str, Any] | None = None) -> Redactor:
        """The redactor of a crawl of ``spider`` (an :class:`~eclaw.Spider` or its class and its ``args``;
        typed loosely, as the spider's own modules import this one)."""
        declared = tuple(spider.secret_args)
        given = dict(args or {})
        if not isinstance(spider, type):
            given = {**vars(spider), **given}  # -a NAME=VALUE became attributes
        redactor = cls(headers=sensitive_headers(settings.sensitive_headers), secret_args=declared)
        for name in declared:
            given.setdefault(name, getattr(spider, name, None))
        redactor.learn(*(str(v) for k, v in given.items() if v and is_secret_arg(k, declared)))
        for entry in settings.http_auth.split(","):
            user, _, password = entry.strip().rpartition("@")[0].partition(":")
            redactor.learn_pair(user, password)
        for user, password in dict(spider.http_auth or {}).values():
            redactor.learn_pair(str(user), str(password))
        for url in [*settings.proxies.split(","), *(os.environ.get(name, "") for name in _PROXY_ENV)]:
            redactor.learn_url(url.strip())
        return redactor

    # -- what it knows ------------------------------------------------------------------

    def learn(self, *secrets: str) -> None:
        """Mask these values from now on (and their percent-encoded forms)."""
        for secret in secrets:
            if len(secret) >= _MIN_SECRET:
                self._values.update({secret, quote(secret, safe=""), quote(secret)})
                self._pattern = None

    def learn_pair(self, user: str, password: str) -> None:
        """A ``user:password`` credential: the password, and the pair as basic auth sends it (base64)."""
        if password:
            self.learn(password, base64.b64encode(f"{user}:{password}".encode()).decode())

    def learn_url(self, url: str) -> None:
        """The password of ``url`` (a proxy's), if it has one."""
        if "@" not in url:
            return
        try:
            parts = urlsplit(url if "://" in url else f"http://{url}")
        except ValueError:
            return
        if parts.password:
            self.learn_pair(unquote(parts.username or ""), unquote(parts.password))

    # -- redaction -----------------------------------------------------------------------

    def text(self, text: str) -> str:
        """``text`` with URL passwords, sensitive header values and every known secret masked."""
        if "@" in text:
            text = _USERINFO.sub(rf"\1:{MASK}@", text)
        text = self._header_text.sub(rf"\g<1>{MASK}", text)
        if self._values:
            if self._pattern is None:
                ordered = sorted(self._values, key=len, reverse=True)  # the longest form first
                self._pattern = re.compile("|".join(re.escape(v) for v in ordered))
            text = self._pattern.sub(MASK, text)
        return text

    def url(self, url: str) -> str:
        """``url`` with its password (and any secret in it) masked."""
        return self.text(url)

    def headers_of(self, headers: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> list[tuple[str, str]]:
        """Header pairs with the values of sensitive headers masked (names kept: a reader sees them)."""
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        return [(k, MASK if k.lower() in self.headers else self.text(str(v))) for k, v in pairs]

    def args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Spider arguments with the values of the secret ones masked."""
        return {k: MASK if is_secret_arg(k, self.secret_args) else self.record(v) for k, v in args.items()}

    def record(self, value: Any) -> Any:
        """A JSON-able record (dicts, lists, strings...), recursively: values under sensitive header
        names or credential keys (``cookies``, ``http_auth``...) masked, every string redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self._field(str(k), v) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [self.record(v) for v in value]
        if isinstance(value, bytes | bytearray):
            return self.record(bytes(value).decode("utf-8", "replace"))
        return value

    def _field(self, key: str, value: Any) -> Any:
        lowered = key.lower()
        if value not in (None, "", {}, []) and (lowered in self.headers or lowered in _SECRET_KEYS):
            return MASK
        if lowered == "proxy" and isinstance(value, str):
            self.learn_url(value)
        return self.record(value)
