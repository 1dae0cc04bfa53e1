"""Request-aware log lines (text or JSON, to a file of the crawl's own).

Log records get ``spider``, ``run_id`` and ``request_id`` from context
variables: the crawl sets the first two for all its tasks, and each download
task sets the request's id, so every line logged about a request carries it.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from eclaw.exceptions import ConfigError
from eclaw.security.redact import Redactor

__all__ = ["TEXT_FORMAT", "JsonFormatter", "LogContext", "Redacting", "crawl_logs", "log_formatter", "request_id"]

request_id: contextvars.ContextVar[int] = contextvars.ContextVar("eclaw_request_id", default=0)
_crawl: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("eclaw_crawl", default=("-", "-"))
# The running crawl's redactor (its tasks inherit it): a log line knows that crawl's secrets.
_redactor: contextvars.ContextVar[Redactor | None] = contextvars.ContextVar("eclaw_redactor", default=None)


class LogContext(logging.Filter):
    """Adds ``spider``, ``run_id`` and ``request_id`` (0: no request) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.spider, record.run_id = _crawl.get()
        record.request_id = request_id.get()
        return True


class OwnCrawl(logging.Filter):
    """Lets through only the records of one crawl (its run id), so two crawls in one process that
    each have a ``log_file`` keep separate files."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    def filter(self, record: logging.LogRecord) -> bool:
        return _crawl.get()[1] == self.run_id


class Redacting(logging.Filter):
    """Redacts every record a handler writes, at every level: its message (arguments merged in),
    its traceback and its stack, with the running crawl's :class:`~eclaw.security.redact.Redactor`
    (outside a crawl, with ``fallback``). The CLI's console and every ``log_file`` have one; add one to
    your own handlers when you embed eclaw::

        handler.addFilter(Redacting())

    Args:
        fallback: the redactor for records logged outside a crawl (default: URL passwords and
            sensitive headers only).
    """

    def __init__(self, fallback: Redactor | None = None) -> None:
        super().__init__()
        self.fallback = fallback or Redactor()

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = _redactor.get() or self.fallback
        try:
            message = record.getMessage()
        except Exception:  # a bad format: logging reports it when the record is formatted
            return True
        record.msg, record.args = redactor.text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = redactor.text(record.stack_info)
        return True


_TRACEBACKS = logging.Formatter()


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, spider, run_id, request_id (and the error)."""

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "time": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "spider": getattr(record, "spider", "-"),
            "run_id": getattr(record, "run_id", "-"),
            "request_id": getattr(record, "request_id", 0),
        }
        if record.exc_info or record.exc_text:  # the text a Redacting filter left, if one did
            data["error"] = record.exc_text or self.formatException(record.exc_info)  # type: ignore[arg-type]
        return json.dumps(data, ensure_ascii=False)


TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(spider)s %(run_id)s req=%(request_id)s]: %(message)s"


def log_formatter(kind: str) -> logging.Formatter:
    return JsonFormatter() if kind == "json" else logging.Formatter(TEXT_FORMAT)


@contextmanager
def crawl_logs(
    spider: str, run_id: str, log_file: str = "", log_format: str = "text", redactor: Redactor | None = None
) -> Iterator[None]:
    """While a crawl runs: its log records name it (its tasks inherit the context) and are redacted
    with its ``redactor``, and with ``log_file`` a handler of its own writes its records (and only its)
    to that file."""
    _crawl.set((spider, run_id))
    _redactor.set(redactor)
    handler = None
    if log_file:
        try:
            handler = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write the log file {log_file}: {exc.strerror}") from None
        handler.addFilter(OwnCrawl(run_id))
        handler.addFilter(LogContext())
        handler.addFilter(Redacting(redactor))
        handler.setFormatter(log_formatter(log_format))
        logging.getLogger("eclaw").addHandler(handler)
    try:
        yield
    finally:
        if handler is not None:
            logging.getLogger("eclaw").removeHandler(handler)
            handler.close()
