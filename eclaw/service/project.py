"""The spiders of a project directory, and the validation of a job's arguments before it starts.

Every rejection is one line (:class:`eclaw.exceptions.ConfigError`): the API answers it as a 4xx,
the CLI prints it, and the service goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eclaw.exceptions import ConfigError, EclawError
from eclaw.security.redact import MASK, is_secret_arg
from eclaw.spider import load_spiders

__all__ = ["Project", "SpiderRef", "redact_args", "validate_args"]

_MAX_ARGS = 64
_MAX_ARG_LEN = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class SpiderRef:
    """One spider of the project: its ``name``, class and file (relative to the project)."""

    name: str
    cls: str
    file: str
    secret_args: tuple[str, ...] = ()

    @property
    def spec(self) -> str:
        """``FILE.py:Class``, as ``eclaw crawl`` takes it."""
        return f"{self.file}:{self.cls}"

    def as_dict(self) -> dict[str, Any]:
        """The API's view."""
        return {"name": self.name, "class": self.cls, "file": self.file, "spec": self.spec}


class Project:
    """A directory of spider files (``*.py``; ``_*.py`` and ``.eclaw-serve/`` are skipped)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ConfigError(f"project directory not found: {root}")
        self._cache: dict[Path, tuple[float, list[SpiderRef], str]] = {}

    def files(self) -> list[Path]:
        """The spider files of the project."""
        return sorted(p for p in self.root.glob("*.py") if not p.name.startswith("_"))

    def spiders(self) -> tuple[list[SpiderRef], dict[str, str]]:
        """The loadable spiders, and a one-line reason for each file that does not load."""
        found: list[SpiderRef] = []
        errors: dict[str, str] = {}
        for path in self.files():
            refs, error = self._load(path)
            found.extend(refs)
            if error:
                errors[path.name] = error
        return found, errors

    def resolve(self, spider: str) -> SpiderRef:
        """The spider named ``spider`` (its ``name``, class name, or ``FILE.py:Class``)."""
        if not spider or len(spider) > 300:
            raise ConfigError("spider: give a spider name or FILE.py:Class")
        file, sep, cls = spider.partition(":")
        if sep or file.endswith(".py"):
            path = (self.root / file).resolve()
            if path.parent != self.root:
                raise ConfigError(f"spider file must be in the project directory: {file}")
            if not path.is_file():
                raise ConfigError(f"spider file not found: {file}")
            refs, error = self._load(path)
            if error:
                raise ConfigError(error)
            return _pick(refs, cls, spider)
        refs, errors = self.spiders()
        matches = [ref for ref in refs if spider in (ref.name, ref.cls)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise ConfigError(f"several spiders named {spider!r}: pick one with FILE.py:Class")
        hint = f" ({len(errors)} file(s) failed to load: see GET /api/spiders)" if errors else ""
        raise ConfigError(f"unknown spider {spider!r}{hint}")

    def check_file(self, name: str, kind: str) -> Path:
        """The file ``name`` of the project directory (a one-line ConfigError if it is not there)."""
        path = (self.root / name).resolve()
        if path.parent != self.root or not path.is_file():
            raise ConfigError(f"{kind} not found in the project directory: {name}")
        return path

    def _load(self, path: Path) -> tuple[list[SpiderRef], str]:
        mtime = path.stat().st_mtime
        cached = self._cache.get(path)
        if cached and cached[0] == mtime:
            return cached[1], cached[2]
        try:
            classes = load_spiders(path)
        except EclawError as exc:
            refs, error = [], str(exc).splitlines()[0]
        else:
            refs = [
                SpiderRef(name=cls.name, cls=cls.__name__, file=path.name, secret_args=tuple(cls.secret_args))
                for cls in classes
            ]
            error = ""
        self._cache[path] = (mtime, refs, error)
        return refs, error


def validate_args(args: Any) -> dict[str, str]:
    """Spider arguments: a JSON object of at most 64 string (or number) values, names ``[A-Za-z_]\\w*``."""
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise ConfigError("args: must be an object of NAME: VALUE")
    if len(args) > _MAX_ARGS:
        raise ConfigError(f"args: at most {_MAX_ARGS} arguments")
    clean: dict[str, str] = {}
    for name, value in args.items():
        if not (isinstance(name, str) and name.isidentifier()):
            raise ConfigError(f"args: bad argument name {name!r}")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ConfigError(f"args: {name} must be a string or a number")
        text = str(value)
        if len(text) > _MAX_ARG_LEN or "\x00" in text:
            raise ConfigError(f"args: {name} is too long or holds a NUL byte")
        clean[name] = text
    return clean


def redact_args(args: dict[str, str], ref: SpiderRef | None) -> dict[str, str]:
    """``args`` with secret values (declared ``secret_args``, or names like password/token/key) masked."""
    declared = ref.secret_args if ref else ()
    return {name: MASK if is_secret_arg(name, declared) else value for name, value in args.items()}


def _pick(refs: list[SpiderRef], cls: str, spider: str) -> SpiderRef:
    if cls:
        for ref in refs:
            if cls in (ref.cls, ref.name):
                return ref
        raise ConfigError(f"no spider {cls!r} in {spider.partition(':')[0]}")
    if len(refs) != 1:
        raise ConfigError(f"{len(refs)} spiders in {spider}: pick one with FILE.py:Class")
    return refs[0]
