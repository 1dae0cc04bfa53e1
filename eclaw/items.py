"""Items: what callbacks yield (dicts, dataclasses, ``Item`` subclasses, pydantic
models), their keys, and validation against declared field types."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any, ClassVar

__all__ = ["Item", "is_item", "item_key", "item_to_dict", "item_type", "validate"]


class Item:
    """Base of a declared item type: subclass it as a dataclass with typed fields.

    ``key`` names the fields that identify one record: the SQLite store upserts
    on it, so a re-run updates rows instead of adding copies. Fields whose type
    does not admit ``None`` are required; values are checked against the
    annotations before the pipelines (a mismatch drops the item as ``invalid``)::

        @dataclass
        class Product(Item):
            key = ("sku",)
            sku: str
            price: float
            tags: list[str] = field(default_factory=list)
            note: str | None = None
    """

    key: ClassVar[tuple[str, ...]] = ()


def is_item(value: object) -> bool:
    """True for what a callback may yield as an item: a mapping, a dataclass instance or a pydantic model."""
    return (
        type(value) is dict  # the commonest item, answered before the ABC checks
        or isinstance(value, Mapping)
        or (dataclasses.is_dataclass(value) and not isinstance(value, type))
        or (hasattr(value, "model_dump") and not isinstance(value, type))
    )


def item_to_dict(item: Any) -> dict[str, Any]:
    """A plain dict of an item."""
    if type(item) is dict:
        return dict(item)
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return dataclasses.asdict(item)
    if hasattr(item, "model_dump"):
        data: dict[str, Any] = item.model_dump(mode="json", warnings=False)
        return data
    return dict(item)


def item_type(item: Any) -> str:
    """The name items are grouped by in the store and quality checks: the class name (``dict`` for mappings)."""
    return "dict" if type(item) is dict or isinstance(item, Mapping) else type(item).__name__


def item_key(item: Any, data: Mapping[str, Any], default: tuple[str, ...] = ()) -> str | None:
    """The item's identity as a string (``None`` if its type declares no key).

    The key fields come from the item class's ``key`` attribute, else ``default``
    (the spider's ``item_key``, for dict items).
    """
    fields = getattr(type(item), "key", None) or default
    if not fields:
        return None
    if isinstance(fields, str):
        fields = (fields,)
    missing = [name for name in fields if data.get(name) in (None, "")]
    if missing:
        raise ValueError(f"key field {missing[0]!r} is empty")
    return "\x1f".join(str(data[name]) for name in fields)


def validate(item: Any) -> str | None:
    """Why ``item`` does not match its declared field types, or ``None`` if it does."""
    if type(item) is dict:  # a plain dict declares no types
        return None
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        for name, hint in _hints(type(item)):
            problem = _check(getattr(item, name), hint)
            if problem:
                return f"field {name!r} {problem}"
        return None
    if hasattr(item, "model_dump") and hasattr(type(item), "model_validate"):
        try:
            type(item).model_validate(item.model_dump(warnings=False))
        except Exception as exc:  # ValidationError (a ValueError), or a dump that cannot serialise
            if not isinstance(exc, ValueError):
                return f"cannot be serialised: {type(exc).__name__}"
            errors: list[dict[str, Any]] = getattr(exc, "errors", list)()
            if errors:
                where = ".".join(str(p) for p in errors[0].get("loc", ()))
                return f"field {where!r}: {errors[0].get('msg', exc)}"
            return str(exc).splitlines()[0]
    return None


@cache
def _hints(cls: type) -> tuple[tuple[str, Any], ...]:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # unresolvable annotations: nothing to check against
        return ()
    return tuple((f.name, hints.get(f.name, Any)) for f in dataclasses.fields(cls))


def _check(value: Any, hint: Any) -> str | None:
    """What is wrong with ``value`` for the annotation ``hint`` (shallow: containers by their own type)."""
    if hint is Any or isinstance(hint, typing.TypeVar):
        return None
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = typing.get_args(hint)
        if value is None:
            return None if type(None) in options else "is required"
        if any(_check(value, option) is None for option in options if option is not type(None)):
            return None
        return f"must be {_name(hint)}, got {type(value).__name__}"
    if value is None:
        return None if hint is type(None) else "is required"
    if origin is typing.Literal:
        return None if value in typing.get_args(hint) else f"must be one of {typing.get_args(hint)}, got"
    expected = origin or hint
    if not isinstance(expected, type):
        return None  # an annotation too fancy to check here
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return None
    if expected is int and isinstance(value, bool):
        return "must be int, got bool"
    if not isinstance(value, expected):
        return f"must be {_name(hint)}, got {type(value).__name__}"
    return None


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
