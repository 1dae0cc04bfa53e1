"""Discovery: which links to follow (link rules) and where pages are listed (sitemaps).

``Rule`` describes links to follow — a spider's ``rules`` (its default ``parse`` follows
them) or ``response.follow_all(rule=...)``; ``glob`` marks a glob pattern. Sitemaps are
read for a spider with ``sitemap_urls``. See docs/rules.md and docs/sitemaps.md.
"""

from __future__ import annotations

from eclaw.discovery.links import STRATEGIES, Rule, Strategy
from eclaw.discovery.patterns import DEFAULT_DENY_EXTENSIONS, Glob, glob
from eclaw.discovery.sitemap_xml import MAX_SITEMAP_SIZE

__all__ = ["DEFAULT_DENY_EXTENSIONS", "MAX_SITEMAP_SIZE", "STRATEGIES", "Glob", "Rule", "Strategy", "glob"]
