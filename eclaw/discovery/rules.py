"""A spider's ``rules``: the links its default ``parse`` follows, CrawlSpider-style.

Each page the rules reach is handed to the spider's ``_parse_rule`` callback with the
index of the rule that found it in ``meta["rule"]`` (a name and a number: a saved crawl
stores them as it stores any request). There the rule's own callback runs, and then, if
the rule ``follows``, the rules are applied to that page as well.

On a page, each rule in turn takes the links it matches; a link a rule took is not
offered to the rules after it (the first matching rule wins, as in Scrapy).
"""

from __future__ import annotations

import inspect
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from eclaw.discovery.links import SEEN_PER_PAGE, Page, Rule, iter_links, page_links, resolve
from eclaw.exceptions import ConfigError
from eclaw.http.request import Request, plain_request
from eclaw.items import is_item

if TYPE_CHECKING:
    from eclaw.http.response import Response

__all__ = ["CrawlRules", "RulesOwner", "yielded"]

logger = logging.getLogger(__name__)


class RulesOwner(Protocol):
    """What the rules need of their spider (:class:`eclaw.spider.Spider`); a rule's callback,
    errback or hook given by name is looked up on it too."""

    @property
    def name(self) -> str: ...

    @property
    def rules(self) -> Sequence[Rule]: ...

    def _parse_rule(self, response: Response) -> Iterable[object] | AsyncIterator[object]: ...


class CrawlRules:
    """A spider's rules, checked, with their callbacks, errbacks and hooks looked up on the spider."""

    def __init__(self, spider: RulesOwner) -> None:
        rules = spider.rules
        name = spider.name
        if isinstance(rules, Rule) or not isinstance(rules, Sequence):
            raise ConfigError(f"spider {name!r}: rules must be a list of Rule(...), got {rules!r}")
        for index, rule in enumerate(rules):
            if not isinstance(rule, Rule):
                raise ConfigError(f"spider {name!r}: rules[{index}] is {rule!r}, not a Rule(...)")
        self._rules = tuple(rules)
        self._name = name
        self._callbacks = [
            resolve(r.callback, spider, f"spider {name!r} rules[{i}] callback") for i, r in enumerate(rules)
        ]
        self._errbacks = [
            resolve(r.errback, spider, f"spider {name!r} rules[{i}] errback") for i, r in enumerate(rules)
        ]
        self._process = [
            resolve(r.process_request, spider, f"spider {name!r} rules[{i}] process_request")
            for i, r in enumerate(rules)
        ]
        self._target: Callable[..., Any] = spider._parse_rule

    def parse(self, response: Response, index: int | None) -> Iterable[object] | AsyncIterator[object]:
        """What the page yields: the callback of rule ``index`` (if any), then, if the rule
        follows (or for a start page, ``index=None``), the requests for its links."""
        if index is None:
            return self.follow(response)
        if not isinstance(index, int) or not 0 <= index < len(self._rules):
            count = len(self._rules)
            raise ConfigError(
                f"request for {response.url} names rule {index!r}; spider {self._name!r} has {count} rules"
            )
        rule, callback = self._rules[index], self._callbacks[index]
        result = callback(response, **(rule.cb_kwargs or {})) if callback is not None else None
        links: Callable[[], Iterable[Request]] = (lambda: self.follow(response)) if rule.follows else tuple
        if inspect.isasyncgen(result) or inspect.isawaitable(result):
            return _async_chain(result, links)
        return _chain(result, links)

    def follow(self, response: Response) -> Iterator[Request]:
        """The requests for the links of ``response`` that a rule takes (the first that matches), made
        as the page is read: a page's links stream into the frontier, never all held at once."""
        if not response.is_text:
            logger.debug("no links followed on %s: not text", response.url)
            return iter(())
        return self._follow(response)

    def _follow(self, response: Response) -> Iterator[Request]:
        page = Page(response.url)
        shared = Counter(rule._source for rule in self._rules)
        found: dict[str, list[str]] = {}  # rules with the same regions share one extraction
        seen: set[str] | None = set() if len(self._rules) > 1 else None  # one rule: its links are unique
        target = self._target
        for index, rule in enumerate(self._rules):
            source = rule._source
            urls: Iterable[str] | None = found.get(source)
            if urls is None and shared[source] > 1:
                urls = found[source] = page_links(response, rule)
            elif urls is None:
                urls = iter_links(response, rule)
            verdict, errback, process = rule._verdict, self._errbacks[index], self._process[index]
            for url in urls:
                if (seen is not None and url in seen) or verdict(url, page) is not None:
                    continue
                if seen is not None and len(seen) < SEEN_PER_PAGE:
                    seen.add(url)
                request = plain_request(url, target)
                request.meta = {"rule": index}
                request.errback = errback
                if process is not None:
                    processed = process(request, response)
                    if processed is None:
                        continue
                    request = processed
                yield request


def yielded(result: Any) -> Iterable[object]:
    """What a plain callback returned, as the values it yields: ``None`` as none, an item or a
    ``Request`` as itself, an iterable of them as it is.

    Raises:
        TypeError: anything else (a string, a number...).
    """
    if result is None:
        return ()
    if isinstance(result, Request) or is_item(result):
        return (result,)
    if isinstance(result, str | bytes) or not isinstance(result, Iterable):
        raise TypeError(f"callback returned {type(result).__name__}: expected items, Requests or None")
    return result


def _chain(result: Any, links: Callable[[], Iterable[Request]]) -> Iterator[object]:
    yield from yielded(result)
    yield from links()


async def _async_chain(result: Any, links: Callable[[], Iterable[Request]]) -> AsyncIterator[object]:
    if inspect.isawaitable(result):
        result = await result
    if inspect.isasyncgen(result):
        async for value in result:
            yield value
    else:
        for value in yielded(result):
            yield value
    for request in links():
        yield request
