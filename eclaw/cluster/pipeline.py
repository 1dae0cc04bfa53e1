"""Redis calls made in one turn of the event loop go to Redis together, in one pipeline.

A worker's downloads end, store their items and hand back their slots and leases at about the same
time, each from its own task: sent one by one, every call would cost a round trip and the client's
own work per request; gathered, they share one. Each caller still gets its own results, or its own
error (a failed command fails only its caller; a lost connection fails every caller of the batch,
each of which retries on its own).

With hiredis installed (``pip install 'eclaw[redis]'`` brings it), commands are also packed by
hiredis's C code rather than redis-py's Python (:func:`pack_in_c`): with its C reply parser, a
worker's CPU fell 14 % (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

__all__ = ["Pipeliner", "pack_in_c"]

Command = tuple[Any, ...]  # the arguments of one Redis command, name first


class Pipeliner:
    """Gathers the commands sent during one turn of the loop and sends them as one pipeline.

    One pipeline is out at a time: the calls made while it is out go together in the next one,
    sent when it comes back (the busier the worker, the bigger its pipelines and the fewer its
    round trips; pipelines also reach Redis in the order they were made).

    ``scripts`` are the Lua scripts called by hash (``EVALSHA``): if Redis does not know them (it
    restarted), they are loaded and only the calls that did not run are sent again (after the
    others: a caller that needs its commands in order sends scripts only, or one command).
    """

    def __init__(self, redis: Any, scripts: Sequence[str]) -> None:
        self._redis = redis
        self._scripts = scripts
        self._queued: list[tuple[Sequence[Command], asyncio.Future[list[Any]]]] = []
        self._sending: asyncio.Task[None] | None = None
        self._flushing = False  # a flush is due, or a pipeline is out

    def send(self, commands: Sequence[Command]) -> asyncio.Future[list[Any]]:
        """The results of ``commands``, in order, once the pipeline they joined came back."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        self._queued.append((commands, future))
        if not self._flushing:
            self._flushing = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        queued, self._queued = self._queued, []
        self._sending = asyncio.ensure_future(self._execute(queued))
        self._sending.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():  # the worker is closing: so are the calls that waited for this pipeline
            queued, self._queued = self._queued, []
            for _, future in queued:
                future.cancel()
        if self._queued:  # made while that pipeline was out
            self._flush()
        else:
            self._sending, self._flushing = None, False

    async def _execute(self, queued: list[tuple[Sequence[Command], asyncio.Future[list[Any]]]]) -> None:
        try:
            results = await self._run([command for commands, _ in queued for command in commands])
        except asyncio.CancelledError:  # the worker is closing
            for _, future in queued:
                future.cancel()
            raise
        except Exception as exc:  # the connection: every caller retries its own calls
            for _, future in queued:
                if not future.done():
                    future.set_exception(exc)
            return
        at = 0
        for commands, future in queued:
            part, at = results[at : at + len(commands)], at + len(commands)
            if future.done():  # its caller was cancelled
                continue
            error = next((result for result in part if isinstance(result, Exception)), None)
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(part)

    async def _run(self, commands: list[Command]) -> list[Any]:
        from redis.exceptions import NoScriptError

        results = await self._pipe(commands)
        missing = [index for index, result in enumerate(results) if isinstance(result, NoScriptError)]
        if missing:  # a restarted Redis: those did not run
            for script in self._scripts:
                await self._redis.script_load(script)
            for index, result in zip(missing, await self._pipe([commands[i] for i in missing]), strict=True):
                results[index] = result
        return results

    async def _pipe(self, commands: list[Command]) -> list[Any]:
        pipe = self._redis.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return list(await pipe.execute(raise_on_error=False))


def pack_in_c(pool: Any) -> None:
    """Make the connections of redis-py's asyncio ``pool`` pack commands with hiredis, if it is installed."""
    try:
        from hiredis import pack_command
    except ImportError:
        return
    base = pool.connection_class

    class Packed(base):  # type: ignore[misc,valid-type]
        def pack_command(self, *args: Any) -> list[bytes]:
            if isinstance(args[0], str) and " " in args[0]:  # "CONFIG SET": redis-py's commands name two words so
                args = (*args[0].split(), *args[1:])
            return [pack_command(args)]

        def pack_commands(self, commands: Any) -> list[bytes]:
            return [b"".join(self.pack_command(*command)[0] for command in commands)]

    Packed.__name__ = Packed.__qualname__ = f"Packed{base.__name__}"
    pool.connection_class = Packed
