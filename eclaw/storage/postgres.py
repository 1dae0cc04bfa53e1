"""PostgreSQL as an output: ``-o 'postgresql://user:pw@host:port/db?table=NAME'`` (or ``postgres://``).

Rows are upserted by the item's key (:mod:`eclaw.storage.postgres_schema` says how a table looks),
in batches (``executemany`` in pipeline mode, one transaction each) over psycopg 3's async
connection, so the event loop never waits on the server. The table is created when the first item
comes, unless ``?create=0``.

**Exactly-once.** Each checkpoint (``--state``) first flushes: the rows since the last one are
committed, or, with the server away, appended to a local spool file and synced. The checkpoint
records the run, the last key-less row's sequence number and the spool's position; a resumed run
deletes the key-less rows this run stored after it (keyed rows are upserts: storing one again
changes nothing) and delivers what the spool still holds. Spooled rows carry their sequence numbers,
so a spooled row delivered twice is stored once.

**The server away.** Before any download, ``open`` connects and checks the table: unreachable,
wrong password, missing database, a table that cannot be created → ConfigError, one line (the
password redacted). Mid-crawl, a failed delivery is logged in one line naming the output and the
reason; the rows wait in the spool (memory holds at most one batch) and are delivered when the
server answers again (tried every few seconds), at the end, or by the next run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eclaw.exceptions import ConfigError
from eclaw.items import item_key, item_to_dict
from eclaw.outputs.api import OutputOptions, OutputSpec
from eclaw.storage.postgres_schema import SHAPE_QUERY, UNIQUES_QUERY, Plan, Shape, Target, parse_target, plan_for

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext
    from eclaw.spider import Spider

__all__ = ["POSTGRES", "PostgresDestination", "PostgresOutput"]

logger = logging.getLogger(__name__)

Row = tuple[Plan, str | None, int, dict[str, Any]]  # plan, key, sequence number (0: keyed), the fields
_RETRY = (1.0, 2.0, 5.0, 10.0)  # seconds before delivering again after a failure


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ConfigError("postgresql:// outputs need psycopg: pip install 'eclaw[postgres]'") from None
    return psycopg


def _reason(exc: BaseException) -> str:
    """The server's or libpq's reason, in one line."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    text = text.rpartition("failed: ")[2] if "failed: " in text else text
    return text.removeprefix("FATAL:").strip() or type(exc).__name__


class PostgresOutput:
    """Item output upserting rows into a PostgreSQL table (see the module's docstring)."""

    def __init__(self, target: Target, *, run_key: str = "default", item_key: tuple[str, ...] = (), batch: int = 500):
        self.target, self.run_key, self.item_key, self.batch = target, run_key, item_key, batch
        self.counts = {"inserted": 0, "updated": 0, "unchanged": 0}
        self._conn: Any = None
        self._shape: Shape | None = None
        self._pending: list[Row] = []
        self._spool_path = Path("eclaw-data") / "postgres.spool"
        self._spool_end = self._spool_done = 0  # bytes in the spool file; bytes of it delivered
        self._run_id = self._seq = 0
        self._resume: dict[str, Any] | None = None
        self._crawl: CrawlContext | None = None
        self._last = 0.0
        self._failures = 0
        self._retry_at = 0.0

    def __repr__(self) -> str:
        return f"PostgresOutput({self.target.shown!r})"

    def check(self, spider: str) -> None:
        """Nothing to check without the server: ``open`` connects before any download."""
        _driver()

    # -- the lifecycle ----------------------------------------------------------------

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        crawl.redactor.learn_url(self.target.url)  # the password is masked wherever the crawl writes it
        self.item_key = self.item_key or tuple(crawl.spider.item_key)
        folder = Path(crawl.settings.state_dir or "eclaw-data")
        self._spool_path = folder / f"{crawl.spider.name}.{self.target.table_name}.pgspool"
        psycopg = _driver()
        try:
            await self._connect()
            self._shape = await self._read_shape()
            if self._shape is None:
                await self._check_creatable()
            self._run_id = int(time.time() * 1e6)
            self._spool_end = self._spool_path.stat().st_size if self._spool_path.exists() else 0
            if self._resume is not None:
                await self._reopen(self._resume)
        except (OSError, psycopg.Error) as exc:
            await self._disconnect()
            raise ConfigError(f"output {self.target.shown}: {_reason(exc)}") from None
        except ConfigError:
            await self._disconnect()
            raise
        self._last = time.monotonic()
        await self._deliver()  # what the spool holds (a killed run's, or one the server left behind)

    async def _reopen(self, saved: dict[str, Any]) -> None:
        """A saved crawl goes on: its run, without the key-less rows it stored after the checkpoint, and
        its spool as it was then (what came after is spooled again by the requests fetched again)."""
        self._run_id, self._seq = int(saved["run_id"]), int(saved["seq"])
        if self._spool_path.exists():
            os.truncate(self._spool_path, min(int(saved["spool_end"]), self._spool_path.stat().st_size))
        self._spool_end = self._spool_path.stat().st_size if self._spool_path.exists() else 0
        self._spool_done = min(int(saved["spool_done"]), self._spool_end)
        await self._cut_back()

    def checkpoint(self) -> dict[str, Any]:
        """The run, its last key-less row and the spool's position (call :meth:`flush` first)."""
        return {"run_id": self._run_id, "seq": self._seq, "spool_end": self._spool_end, "spool_done": self._spool_done}

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue a saved crawl's run when opened."""
        self._resume = saved

    async def flush(self) -> None:
        """Commit the rows waiting, or spool them (synced) when the server does not take them."""
        await self._deliver()
        if self._pending:
            self._spill()
        if self._spool_end > self._spool_done:
            await asyncio.to_thread(_sync, self._spool_path)

    async def process_item(self, item: Any, spider: Spider) -> Any:
        data = item_to_dict(item)
        key = item_key(item, data, self.item_key)  # raises on an empty key field: dead-lettered
        plan = plan_for(item, self.item_key)
        seq = 0
        if not plan.key:
            self._seq += 1
            seq = self._seq
        self._pending.append((plan, key, seq, json.loads(json.dumps(data, default=str))))
        if len(self._pending) >= self.batch or time.monotonic() - self._last > 1.0:
            await self._deliver()
        return item

    async def close(self) -> None:
        self._retry_at = 0.0  # the crawl ends: one more try, however recent the last failure
        try:
            await self.flush()
            finished = self._crawl is None or self._crawl.stats.finish_reason == "finished"
            if self._spool_end > self._spool_done:
                logger.error(
                    "output %s: %d bytes of rows kept in %s (the server did not take them); the next run delivers them",
                    self.target.shown,
                    self._spool_end - self._spool_done,
                    self._spool_path,
                )
            elif finished:
                await self._replace_previous()
                self._spool_path.unlink(missing_ok=True)
        finally:
            await self._disconnect()
        logger.info("output %s: %d inserted, %d updated, %d unchanged", self.target.shown, *self.counts.values())

    # -- the server -------------------------------------------------------------------

    async def _connect(self) -> None:
        psycopg = _driver()
        timeout = {} if "connect_timeout" in self.target.url else {"connect_timeout": 10}
        self._conn = await psycopg.AsyncConnection.connect(self.target.url, autocommit=True, **timeout)

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception as exc:  # a connection already broken
                logger.debug("closing %s: %s", self.target.shown, exc)

    def _table(self) -> Any:
        from psycopg import sql

        return sql.Identifier(*self.target.table)

    async def _read_shape(self) -> Shape | None:
        name = self._table().as_string(self._conn)
        async with self._conn.cursor() as cur:
            await cur.execute(SHAPE_QUERY, {"table": name})
            columns = {str(n): str(t) for n, t in await cur.fetchall()}
            if not columns:
                return None
            await cur.execute(UNIQUES_QUERY, {"table": name})
            uniques = tuple(frozenset(row[0]) for row in await cur.fetchall())
        shape = Shape(columns, uniques)
        if columns.get("data") != "jsonb":
            raise ConfigError(f"output {self.target.shown}: the table has no 'data jsonb' column (not an eclaw table)")
        return shape

    async def _check_creatable(self) -> None:
        shown, table = self.target.shown, self.target.table_name
        if not self.target.create:
            raise ConfigError(f"output {shown}: table {table} does not exist (create=0)")
        schema = self.target.table[0] if len(self.target.table) == 2 else None
        async with self._conn.cursor() as cur:
            await cur.execute(
                "SELECT n.nspname, has_schema_privilege(n.oid, 'CREATE') FROM pg_namespace n"
                " WHERE n.nspname = coalesce(%s, current_schema())",
                (schema,),
            )
            row = await cur.fetchone()
        if row is None:
            raise ConfigError(f"output {shown}: cannot create table {table}: no schema {schema or 'in search_path'}")
        if not row[1]:
            raise ConfigError(f"output {shown}: cannot create table {table}: no CREATE permission on schema {row[0]}")

    async def _cut_back(self) -> None:
        if self._shape is None or "eclaw_seq" not in self._shape.columns:
            return
        from psycopg import sql

        query = sql.SQL("DELETE FROM {} WHERE eclaw_run_id = %s AND eclaw_seq > %s").format(self._table())
        await self._conn.execute(query, (self._run_id, self._seq))

    async def _replace_previous(self) -> None:
        """A complete run replaces the key-less rows of earlier runs with its run key."""
        if self._shape is None or "eclaw_run_key" not in self._shape.columns or self._conn is None:
            return
        from psycopg import sql

        query = sql.SQL("DELETE FROM {} WHERE eclaw_run_key = %s AND eclaw_run_id < %s").format(self._table())
        try:
            await self._conn.execute(query, (self.run_key, self._run_id))
        except Exception as exc:
            logger.error("output %s: earlier runs' key-less rows not removed: %s", self.target.shown, _reason(exc))

    # -- delivery ---------------------------------------------------------------------

    async def _deliver(self) -> None:
        """Send the spool's rows, then those waiting; on a failure keep them spooled (and wait a little
        before trying again: a checkpoint never waits for a server that is away)."""
        self._last = time.monotonic()
        if time.monotonic() < self._retry_at:
            if len(self._pending) >= self.batch:
                self._spill()
            return
        psycopg = _driver()
        try:
            if self._conn is None or self._conn.closed:
                await self._connect()
            while self._spool_done < self._spool_end:
                rows, done = self._read_spool()
                await self._send_or_refuse(rows)
                self._spool_done = done
            while self._pending:
                await self._send_or_refuse(self._pending[: self.batch])
                del self._pending[: self.batch]
        except (OSError, psycopg.OperationalError, psycopg.InterfaceError, TimeoutError) as exc:
            await self._failed(exc)
        else:
            if self._failures:
                logger.warning("output %s: the server answers again; spooled rows delivered", self.target.shown)
            self._failures = 0

    async def _send_or_refuse(self, rows: list[Row]) -> None:
        """Send ``rows``; those the table or the server refuses (not a connection's failure) are dead-lettered."""
        psycopg = _driver()
        try:
            await self._send(rows)
        except (OSError, psycopg.OperationalError, psycopg.InterfaceError, TimeoutError):
            raise
        except (ConfigError, psycopg.Error) as exc:  # the table does not fit, a value does not fit its column
            shown = self.target.shown
            reason = str(exc).removeprefix(f"output {shown}: ")
            logger.error("output %s: %d rows refused (%s); they go to the dead-letter file", shown, len(rows), reason)
            if self._crawl is not None:
                self._crawl.dead_letter(self, [row[3] for row in rows], exc)

    async def _send(self, rows: list[Row]) -> None:
        counts = {"inserted": 0, "updated": 0, "unchanged": 0}
        async with asyncio.timeout(120), self._conn.transaction(), self._conn.cursor() as cur:
            for plan in dict.fromkeys(row[0] for row in rows):
                shape = await self._fit(plan)
                query, columns = shape.insert(self._table(), plan)
                params = [self._params(row, columns) for row in rows if row[0] == plan]
                await cur.executemany(query, params, returning=True)
                while True:
                    result = await cur.fetchone()
                    name = "unchanged" if result is None else "inserted" if result[0] else "updated"
                    counts[name] += 1
                    if not cur.nextset():
                        break
        for name, n in counts.items():
            self.counts[name] += n
            if self._crawl is not None and n:
                self._crawl.stats.counters[f"postgres {name}"] += n

    async def _fit(self, plan: Plan) -> Shape:
        """The table, created for ``plan`` if missing; ConfigError when ``plan``'s rows do not fit it."""
        if self._shape is None:
            if not self.target.create:
                raise ConfigError(f"output {self.target.shown}: table {self.target.table_name} does not exist")
            await self._conn.execute(Shape.create(self._table(), plan))
            self._shape = await self._read_shape()
            assert self._shape is not None
        self._shape.check(plan, self.target.shown)
        return self._shape

    def _params(self, row: Row, columns: list[str]) -> list[Any]:
        plan, _, seq, data = row
        jsonb = {name for name, kind in plan.columns if kind == "jsonb"}
        values = [json.dumps(data.get(name)) if name in jsonb else data.get(name) for name in columns]
        rest = {name: value for name, value in data.items() if name not in columns}
        values.append(json.dumps(rest))
        if not plan.key:
            values += [self.run_key, self._run_id, seq]
        return values

    async def _failed(self, exc: BaseException) -> None:
        self._failures += 1
        self._retry_at = time.monotonic() + _RETRY[min(self._failures, len(_RETRY)) - 1]
        await self._disconnect()  # broken: a new connection next time
        if self._failures == 1:
            logger.error(
                "output %s: cannot deliver rows (%s); they are spooled in %s and delivered when it answers",
                self.target.shown,
                _reason(exc),
                self._spool_path,
            )
        self._spill()

    # -- the spool --------------------------------------------------------------------

    def _spill(self) -> None:
        """Append the rows waiting to the spool file (synchronous, local: a batch at most)."""
        if not self._pending:
            return
        lines = b"".join(
            json.dumps({"p": plan.as_json(), "k": key, "s": seq, "v": data}).encode() + b"\n"
            for plan, key, seq, data in self._pending
        )
        self._spool_path.parent.mkdir(parents=True, exist_ok=True)
        with self._spool_path.open("ab") as file:
            file.truncate(self._spool_end)  # a torn write of an earlier spill is overwritten
            file.write(lines)
        self._spool_end += len(lines)
        self._pending = []

    def _read_spool(self) -> tuple[list[Row], int]:
        """A batch of rows from the spool's undelivered part, and the position after them."""
        rows: list[Row] = []
        with self._spool_path.open("rb") as file:
            file.seek(self._spool_done)
            position = self._spool_done
            while len(rows) < self.batch and position < self._spool_end:
                line = file.readline()
                if not line.endswith(b"\n"):  # torn by a kill while it was written: never counted, dropped
                    self._spool_end = position
                    break
                position += len(line)
                record = json.loads(line)
                rows.append((Plan.from_json(record["p"]), record["k"], int(record["s"]), record["v"]))
        return rows, position


def _sync(path: Path) -> None:
    with path.open("rb") as file:
        os.fsync(file.fileno())


class PostgresDestination:
    """The ``eclaw.destinations`` plug-in of ``postgresql://`` and ``postgres://``: items go there whole."""

    def make_items(self, spec: OutputSpec, options: OutputOptions) -> PostgresOutput:
        target = parse_target(spec.location, spec.options, spec.text)
        return PostgresOutput(target, run_key=options.run_key, item_key=options.item_key, batch=target.batch)


POSTGRES = PostgresDestination()
