"""Page actions: what the browser does with a page before its DOM becomes the response.

They are declared as JSON in ``meta["browser"]``, so a request keeps them wherever it waits
(the spilled frontier, a ``--state`` directory, Redis)::

    {
        "wait_until": "load",      # when the navigation is over: commit, domcontentloaded, load, networkidle
        "actions": [               # then these steps, in order
            {"wait_for": "li.gig"},                       # a selector appears (state: visible, attached...)
            {"click": "button.more", "times": 5},         # click; again while it is still there
            {"scroll": 3},                                # scroll to the bottom 3 times
            {"scroll": "until_stable", "max": 20},        # ... until the page stops growing
            {"script": "window.localStorage.clear()"},   # run JavaScript (a Promise is awaited)
            {"sleep": 0.5},                               # wait that long
            {"wait_until": "networkidle"},                # a load state
        ],
        "timeout": 30,             # seconds for all of it (default: the browser_timeout setting)
        "context": "",             # a named browser context (cookie jar, storage) of its own
    }

After each click and scroll the page is given time to settle: the step waits until no
request of the page has been in flight for ``wait`` seconds (0.5 by default).
:func:`actions` builds and checks such a dict; :meth:`Plan.parse` reads one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from eclaw.exceptions import ConfigError

if TYPE_CHECKING:
    from playwright.async_api import Page

    from eclaw.fetchers.browser.network import Network

__all__ = ["Plan", "Step", "actions"]

logger = logging.getLogger(__name__)

WAIT_UNTIL = ("commit", "domcontentloaded", "load", "networkidle")
LOAD_STATES = ("domcontentloaded", "load", "networkidle")
SELECTOR_STATES = ("attached", "detached", "visible", "hidden")
_TOP = ("wait_until", "actions", "timeout", "context")
_HEIGHT = "document.documentElement.scrollHeight"
_TO_BOTTOM = "window.scrollTo(0, document.documentElement.scrollHeight)"


class Step(Protocol):
    """One page action."""

    def describe(self) -> str: ...

    async def run(self, page: Page, network: Network) -> None: ...


@dataclass(frozen=True, slots=True)
class WaitFor:
    selector: str
    state: str = "visible"

    def describe(self) -> str:
        return f"wait_for {self.selector!r}"

    async def run(self, page: Page, network: Network) -> None:
        await page.wait_for_selector(self.selector, state=self.state)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Click:
    selector: str
    times: int = 1
    wait: float = 0.5

    def describe(self) -> str:
        return f"click {self.selector!r}"

    async def run(self, page: Page, network: Network) -> None:
        target = page.locator(self.selector).first
        await target.click()  # the first click waits for the element: a missing one is an error
        await network.quiet(self.wait)
        for _ in range(self.times - 1):  # "load more" buttons go away at the end: then stop, no error
            if not await target.is_visible():
                break
            await target.click()
            await network.quiet(self.wait)


@dataclass(frozen=True, slots=True)
class Scroll:
    times: int
    until_stable: bool = False
    wait: float = 0.5

    def describe(self) -> str:
        return "scroll until_stable" if self.until_stable else f"scroll {self.times}"

    async def run(self, page: Page, network: Network) -> None:
        for _ in range(self.times):
            height = await page.evaluate(_HEIGHT)
            await page.evaluate(_TO_BOTTOM)
            await network.quiet(self.wait)
            if self.until_stable and await page.evaluate(_HEIGHT) == height:
                break


@dataclass(frozen=True, slots=True)
class Script:
    source: str

    def describe(self) -> str:
        return "script"

    async def run(self, page: Page, network: Network) -> None:
        await page.evaluate(self.source)


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float

    def describe(self) -> str:
        return f"sleep {self.seconds:g}"

    async def run(self, page: Page, network: Network) -> None:
        await asyncio.sleep(self.seconds)


@dataclass(frozen=True, slots=True)
class LoadState:
    state: str

    def describe(self) -> str:
        return f"wait_until {self.state}"

    async def run(self, page: Page, network: Network) -> None:
        await page.wait_for_load_state(self.state)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do with one page: the navigation's end, the steps, the time for both, the context."""

    wait_until: str = "load"
    steps: tuple[Step, ...] = ()
    timeout: float | None = None
    context: str = ""

    @classmethod
    def parse(cls, value: Any, where: str = "meta['browser']") -> Plan:
        """The plan a ``meta["browser"]`` dict declares; a one-line :class:`ConfigError` naming what is wrong."""
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where} must be a dict, got {value!r}")
        unknown = sorted(set(value) - set(_TOP))
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(_TOP)})")
        steps = value.get("actions", ())
        if isinstance(steps, str | Mapping) or not isinstance(steps, Sequence):
            raise ConfigError(f"{where}['actions'] must be a list of steps, got {steps!r}")
        timeout = value.get("timeout")
        if timeout is not None:
            timeout = _number(timeout, f"{where}['timeout']", positive=True)
        context = value.get("context", "")
        if not isinstance(context, str):
            raise ConfigError(f"{where}['context'] must be a string, got {context!r}")
        return cls(
            wait_until=_choice(value.get("wait_until", "load"), WAIT_UNTIL, f"{where}['wait_until']"),
            steps=tuple(_step(raw, f"{where}: step {n}") for n, raw in enumerate(steps, 1)),
            timeout=timeout,
            context=context,
        )


def actions(
    *steps: Mapping[str, Any], wait_until: str = "load", timeout: float | None = None, context: str = ""
) -> dict[str, Any]:
    """A checked ``meta["browser"]`` dict: ``steps`` in order once the navigation reached ``wait_until``.

    ``Request(url, render=True, meta={"browser": actions({"click": "button.more"}, {"wait_for": "li"})})``

    Args:
        steps: step dicts (see the module): ``{"wait_for": css}``, ``{"click": css, "times": n}``,
            ``{"scroll": n | "until_stable"}``, ``{"script": js}``, ``{"sleep": s}``, ``{"wait_until": state}``.
        wait_until: when the navigation counts as done (``load``, ``domcontentloaded``, ``networkidle``, ``commit``).
        timeout: seconds for the navigation and the steps together (default: the ``browser_timeout`` setting).
        context: a named browser context for this page (its own cookies and storage); ``""`` is the shared one.

    Raises:
        ConfigError: a step or an option is not in the vocabulary (one line naming it).
    """
    declared: dict[str, Any] = {"actions": [dict(step) for step in steps]}
    if wait_until != "load":
        declared["wait_until"] = wait_until
    if timeout is not None:
        declared["timeout"] = timeout
    if context:
        declared["context"] = context
    Plan.parse(declared, "actions()")
    return declared


def _step(raw: Any, where: str) -> Step:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a dict like {{'click': 'button.more'}}, got {raw!r}")
    kinds = [key for key in raw if key in _PARSERS]
    if len(kinds) != 1:
        what = "no action" if not kinds else f"several actions ({', '.join(kinds)})"
        raise ConfigError(f"{where} has {what}: give one of {', '.join(_PARSERS)}")
    kind = kinds[0]
    allowed = _OPTIONS[kind]
    extra = sorted(set(raw) - {kind, *allowed})
    if extra:
        options = f"options: {', '.join(allowed)}" if allowed else "no options"
        raise ConfigError(f"{where}: {kind} takes {options}, not {extra[0]!r}")
    return _PARSERS[kind](raw, f"{where} ({kind})")


def _wait_for(raw: Mapping[str, Any], where: str) -> Step:
    state = _choice(raw.get("state", "visible"), SELECTOR_STATES, where + " state")
    return WaitFor(_selector(raw["wait_for"], where), state)


def _click(raw: Mapping[str, Any], where: str) -> Step:
    times = _count(raw.get("times", 1), where + " times")
    return Click(_selector(raw["click"], where), times, _number(raw.get("wait", 0.5), where + " wait"))


def _scroll(raw: Mapping[str, Any], where: str) -> Step:
    wait = _number(raw.get("wait", 0.5), where + " wait")
    value = raw["scroll"]
    if value == "until_stable":
        return Scroll(_count(raw.get("max", 20), where + " max"), until_stable=True, wait=wait)
    if "max" in raw:
        raise ConfigError(f"{where}: max goes with 'until_stable', not with a count")
    return Scroll(_count(value, where + " (a count or 'until_stable')"), wait=wait)


def _script(raw: Mapping[str, Any], where: str) -> Step:
    source = raw["script"]
    if not isinstance(source, str) or not source.strip():
        raise ConfigError(f"{where} must be JavaScript source, got {source!r}")
    return Script(source)


def _sleep(raw: Mapping[str, Any], where: str) -> Step:
    return Sleep(_number(raw["sleep"], where))


def _load_state(raw: Mapping[str, Any], where: str) -> Step:
    return LoadState(_choice(raw["wait_until"], LOAD_STATES, where))


_PARSERS = {
    "wait_for": _wait_for,
    "click": _click,
    "scroll": _scroll,
    "script": _script,
    "sleep": _sleep,
    "wait_until": _load_state,
}
_OPTIONS: dict[str, tuple[str, ...]] = {
    "wait_for": ("state",),
    "click": ("times", "wait"),
    "scroll": ("wait", "max"),
    "script": (),
    "sleep": (),
    "wait_until": (),
}


def _selector(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} needs a CSS selector, got {value!r}")
    return value


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    if value not in choices:
        raise ConfigError(f"{where} must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _number(value: Any, where: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or (positive and value == 0):
        raise ConfigError(f"{where} must be a {'positive' if positive else 'non-negative'} number, got {value!r}")
    return float(value)


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where} must be a whole number of at least 1, got {value!r}")
    return value
