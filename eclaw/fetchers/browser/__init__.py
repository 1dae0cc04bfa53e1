"""The browser fetcher (``eclaw[browser]``): pages rendered by headless Chromium through Playwright.

``Request(url, render=True)`` (or a spider's ``fetcher = "browser"``) sends a request here;
its page actions are declared in ``meta["browser"]`` (see :func:`actions`). Playwright is
imported only when the fetcher opens, so eclaw imports without the extra.
"""

from eclaw.fetchers.browser.actions import Plan, actions
from eclaw.fetchers.browser.fetcher import BrowserFetcher, find_chromium

__all__ = ["BrowserFetcher", "Plan", "actions", "find_chromium"]
