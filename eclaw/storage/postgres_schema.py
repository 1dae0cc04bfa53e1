"""The PostgreSQL output's table: the target from the URI, columns from the item type, the SQL.

A table holds one row per item. Its columns come from the item type: a dataclass's (or ``Item``'s, or a
pydantic model's) annotated fields, mapped ``str``→``text``, ``int``→``bigint``, ``float``→``double
precision``, ``bool``→``boolean``, ``datetime``→``timestamptz``, anything else→``jsonb``; dict items give
their key fields (``text``). A ``data jsonb`` column holds the rest of each item's fields (those without a
column of their own). An item type with a key has it as the primary key (rows upserted on it); a key-less
one gets ``eclaw_run_key``, ``eclaw_run_id`` and ``eclaw_seq`` (unique per run and sequence number, so a
row delivered twice is stored once).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from eclaw.exceptions import ConfigError
from eclaw.security.redact import redact_url

__all__ = ["KEYLESS", "Plan", "Shape", "Target", "parse_target", "plan_for"]

KEYLESS = (("eclaw_run_key", "text"), ("eclaw_run_id", "bigint"), ("eclaw_seq", "bigint"))
_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),  # before int: a bool is an int
    (int, "bigint"),
    (float, "double precision"),
    (str, "text"),
    (dt.datetime, "timestamp with time zone"),
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_OWN_OPTIONS = {"table", "create", "batch"}


@dataclass(frozen=True, slots=True)
class Target:
    """Where rows go: the connection URL (libpq options from the query kept), the table, may it be created."""

    url: str
    table: tuple[str, ...]  # (name,) or (schema, name)
    create: bool
    shown: str  # the URI with its password redacted, for every message
    batch: int = 500  # rows a transaction

    @property
    def table_name(self) -> str:
        return ".".join(self.table)


def parse_target(location: str, options: Mapping[str, str], text: str) -> Target:
    """The target of ``postgresql://user:pw@host:port/db?table=NAME[&create=0][&batch=500]`` (other query
    options go to libpq: ``sslmode``, ``connect_timeout``...). ConfigError naming the problem."""
    shown = redact_url(text)
    table = options.get("table", "")
    if not table:
        raise ConfigError(f"output {shown}: name the table (?table=NAME)")
    parts = tuple(table.split("."))
    if len(parts) > 2 or not all(_NAME.fullmatch(part) for part in parts):
        raise ConfigError(f"output {shown}: bad table name {table!r} (letters, digits, _; optionally SCHEMA.NAME)")
    create = options.get("create", "1").lower()
    if create not in {"0", "1", "true", "false", "yes", "no"}:
        raise ConfigError(f"output {shown}: create={create!r} (use 1 or 0)")
    batch = options.get("batch", "500")
    if not batch.isdigit() or int(batch) < 1:
        raise ConfigError(f"output {shown}: batch={batch!r} (rows a transaction: a whole number from 1)")
    rest = "&".join(f"{k}={v}" for k, v in options.items() if k not in _OWN_OPTIONS)
    url = location.replace("postgres://", "postgresql://", 1) + (f"?{rest}" if rest else "")
    return Target(url=url, table=parts, create=create in {"1", "true", "yes"}, shown=shown, batch=int(batch))


@dataclass(frozen=True, slots=True)
class Plan:
    """How one item type's fields map to columns: its key fields and typed columns (key first)."""

    key: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]

    def as_json(self) -> list[Any]:
        return [list(self.key), [list(column) for column in self.columns]]

    @classmethod
    def from_json(cls, value: list[Any]) -> Plan:
        return cls(tuple(value[0]), tuple((str(n), str(t)) for n, t in value[1]))

    def ddl_columns(self) -> list[tuple[str, str]]:
        """Every column a new table for this type has (``data`` and the run columns included)."""
        extra = list(KEYLESS) if not self.key else []
        return [*((name, kind or "text") for name, kind in self.columns), ("data", "jsonb"), *extra]


def plan_for(item: Any, default_key: tuple[str, ...]) -> Plan:
    """The plan of ``item``'s type (dict items: their key fields, as text)."""
    if isinstance(item, Mapping):
        return Plan(default_key, tuple((name, "") for name in default_key))  # "": text, or the table's type
    cls: Any = type(item)
    return _plan_of(cls, default_key)


@cache
def _plan_of(cls: type, default_key: tuple[str, ...]) -> Plan:
    key = tuple(getattr(cls, "key", None) or default_key)
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: its field is stored as jsonb
        hints = {}
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls)]
    else:  # a pydantic model
        names = list(getattr(cls, "model_fields", {}) or hints)
    columns = [(name, sql_type(hints.get(name, Any))) for name in names if name != "data" and _NAME.fullmatch(name)]
    ordered = sorted(columns, key=lambda column: column[0] not in key)  # key columns first
    return Plan(key, tuple(ordered))


def sql_type(hint: Any) -> str:
    """The column type of an annotation (``X | None`` as ``X``)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(args) == 1:
            return sql_type(args[0])
        return "jsonb"
    if isinstance(hint, type):
        for python, sql in _TYPES:
            if issubclass(hint, python):
                return sql
    return "jsonb"


@dataclass(frozen=True, slots=True)
class Shape:
    """An existing table: its columns' types (``format_type`` names) and its unique column sets."""

    columns: dict[str, str]
    uniques: tuple[frozenset[str], ...]

    def check(self, plan: Plan, shown: str) -> None:
        """ConfigError (one line) when rows of ``plan`` cannot be upserted into this table."""
        if self.columns.get("data") != "jsonb":
            raise ConfigError(f"output {shown}: the table has no 'data jsonb' column (not an eclaw table)")
        conflict = frozenset(plan.key) if plan.key else frozenset(("eclaw_run_id", "eclaw_seq"))
        if conflict not in self.uniques or not conflict <= self.columns.keys():
            what = f"key ({', '.join(plan.key)})" if plan.key else "run columns (eclaw_run_id, eclaw_seq)"
            raise ConfigError(f"output {shown}: the table has no unique index on the items' {what}")
        for name, kind in plan.columns:
            have = self.columns.get(name)
            if kind and have is not None and have != kind:
                raise ConfigError(f"output {shown}: column {name!r} is {have}, the item field is {kind}")

    def insert(self, table: Any, plan: Plan) -> tuple[Any, list[str]]:
        """The upsert of one row of ``plan`` (``%s`` placeholders: the columns returned, then ``data``,
        then, key-less, run key, run id and sequence number); returns ``(query, columns)``."""
        from psycopg import sql

        columns = [name for name, _ in plan.columns if name in self.columns]
        names = [*columns, "data", *(name for name, _ in KEYLESS if not plan.key)]
        values = sql.SQL(", ").join(sql.SQL("%s::{}").format(sql.SQL(self.columns[name])) for name in names)
        head = sql.SQL("INSERT INTO {} AS t ({}) VALUES ({}) ").format(
            table, sql.SQL(", ").join(map(sql.Identifier, names)), values
        )
        if not plan.key:
            tail = sql.SQL("ON CONFLICT (eclaw_run_id, eclaw_seq) DO NOTHING RETURNING true")
            return head + tail, columns
        changed = [name for name in names if name not in plan.key]
        upsert = "ON CONFLICT ({}) DO UPDATE SET {} WHERE ({}) IS DISTINCT FROM ({}) RETURNING (xmax = 0)"
        update = sql.SQL(upsert).format(
            sql.SQL(", ").join(map(sql.Identifier, plan.key)),
            sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(n)) for n in changed),
            sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(n)) for n in changed),
            sql.SQL(", ").join(sql.SQL("EXCLUDED.{}").format(sql.Identifier(n)) for n in changed),
        )
        return head + update, columns

    @staticmethod
    def create(table: Any, plan: Plan) -> Any:
        """``CREATE TABLE IF NOT EXISTS`` for ``plan``'s rows."""
        from psycopg import sql

        unique = plan.key or ("eclaw_run_id", "eclaw_seq")
        return sql.SQL("CREATE TABLE IF NOT EXISTS {} ({}, {} ({}))").format(
            table,
            sql.SQL(", ").join(
                sql.SQL("{} {}").format(sql.Identifier(name), sql.SQL(kind)) for name, kind in plan.ddl_columns()
            ),
            sql.SQL("PRIMARY KEY" if plan.key else "UNIQUE"),
            sql.SQL(", ").join(map(sql.Identifier, unique)),
        )


SHAPE_QUERY = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
WHERE a.attrelid = to_regclass(%(table)s) AND a.attnum > 0 AND NOT a.attisdropped
"""
UNIQUES_QUERY = """
SELECT array_agg(a.attname::text) FROM pg_index i
CROSS JOIN LATERAL unnest(i.indkey) AS k(attnum)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = to_regclass(%(table)s) AND i.indisunique GROUP BY i.indexrelid
"""
