"""The saved-state side of a crawl (``--state``): open or resume it, checkpoint at a barrier,
save it at the end. See :mod:`eclaw.core.state` for what is saved."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from eclaw.contracts import DupeFilter, Resumable, SavesSeen
from eclaw.core.accounting import Intake
from eclaw.core.activity import Activity
from eclaw.core.lending import Lending
from eclaw.core.start import StartFeeder
from eclaw.core.state import CrawlState, Saved, restore_outputs, save_outputs
from eclaw.frontier.base import Frontier
from eclaw.security.redact import Redactor
from eclaw.spider import Spider
from eclaw.stats import Stats

__all__ = ["Checkpointer"]

logger = logging.getLogger(__name__)


class Checkpointer:
    """Checkpoints are taken at a barrier: downloads go on, callbacks wait at the gate until those
    running have ended and every item they yielded is through the pipelines (and each output has
    made it durable). The outputs then hold exactly the items of the requests marked done."""

    def __init__(
        self,
        state: CrawlState,
        *,
        spider: Spider,
        stats: Stats,
        frontier: Frontier,
        activity: Activity,
        intake: Intake,
        outputs: Mapping[str, Resumable],
        start: StartFeeder,
        lending: Lending | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.state = state
        self._spider = spider
        self._stats = stats
        self._frontier = frontier
        self._activity = activity
        self._intake = intake
        self._outputs = outputs
        self._start = start
        self._lending = lending
        self._redactor = redactor or Redactor()

    def _dupefilter(self) -> DupeFilter | None:
        """What ``--state`` saves of the frontier's own: its duplicate filter, if it has one."""
        frontier = self._frontier
        return frontier.dupefilter if isinstance(frontier, SavesSeen) else None

    async def open(self) -> Saved:
        """Lock and read the state; hand each output its saved position (it cuts itself back to it)."""
        saved = await self.state.open(self._activity.wake)
        self._stats.restore(saved.stats)
        if saved.status == "finished":
            await self.state.close()
            self._stats.finish_reason = "already finished"
            self._stats.finished_at = time.time()
            logger.info("crawl %r in %s had already finished: nothing to do", self._spider.name, self.state.directory)
        else:
            restore_outputs(self._outputs, saved.outputs)
        return saved

    async def resume(self, saved: Saved) -> None:
        """Every request saved as not finished goes back to the frontier; the dupe filter is read back."""
        dupefilter = self._dupefilter()
        if dupefilter is not None:
            self.state.load_dupefilter(dupefilter.load)
        logger.info(
            "resuming crawl %r from %s (%s): %d requests to fetch",
            self._spider.name,
            self.state.directory,
            saved.status,
            saved.pending,
        )
        async for batch in self.state.pending_requests():
            await self._intake.resumed(batch)

    def due(self) -> bool:
        return self.state.due()

    async def checkpoint(self, status: str) -> None:
        """Save the crawl at the barrier: no callback running, every parsed item stored."""
        state, activity = self.state, self._activity
        await state.saved()
        async with activity.barrier():
            while True:
                if activity.settled():
                    for output in self._outputs.values():
                        await output.flush()
                    if activity.settled():
                        break
                    continue
                activity.wakeup.clear()
                await activity.wakeup.wait()
            dupefilter = self._dupefilter()
            snapshot = state.snapshot(
                status=status,
                stats=self._redactor.record(self._stats.as_dict()),
                start_done=self._start.exhausted,
                outputs=_kept(save_outputs(self._outputs), status),
                dupefilter=dupefilter.dump if dupefilter is not None else None,
            )
        await state.save(snapshot, self._lending.checkpointed if self._lending is not None else None)

    async def close(self, *, ran: bool) -> None:
        """The last checkpoint (if the loop came to its end: a consistent point), then release the directory."""
        try:
            if ran:
                reason = self._stats.finish_reason
                finished = reason == "finished" or reason.startswith("closespider")
                await self.checkpoint("finished" if finished else "paused")
                await self.state.saved()
                if not finished:
                    logger.warning(
                        "crawl %r paused (%s): state saved in %s; run it again to resume",
                        self._spider.name,
                        reason,
                        self.state.directory,
                    )
        except Exception as exc:  # the previous checkpoint stands: a resume goes on from there
            logger.error("could not save the crawl state in %s: %s", self.state.directory, exc)
        finally:
            await self.state.close()


def _kept(saved: dict[str, Any], status: str) -> dict[str, Any]:
    """What a checkpoint keeps of the outputs: all of it while the crawl may resume (the cookie jars
    and session pool too: a login must survive a pause); once it finished, nothing resumes from it,
    so not the jars' and middlewares' contents (no cookie, no session is left on disk)."""
    if status != "finished":
        return saved
    return {name: info for name, info in saved.items() if name != "cookies" and not name.startswith("middleware ")}
