"""Link rules: a spider's ``rules`` and ``response.follow_all(rule=...)``, against the news site."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from eclaw import ConfigError, Engine, Request, Response, Settings, Spider
from eclaw.discovery import DEFAULT_DENY_EXTENSIONS, Rule, glob
from eclaw.discovery.links import RULE_OPTIONS
from eclaw.exceptions import NotTextResponse
from eclaw.frontier.serial import dumps, loads
from eclaw.http.response import RULE_KEYWORDS
from eclaw.testing import MockFetcher, collect, serve
from tests.conftest import assert_accounted
from tests.discoverysite import BINARY, SECTIONS, NewsSite, articles, listed

SETTINGS = Settings(store="", retries=0)
NOT_PAGES = ("/docs/", "/media/", "/podcast/", "/archives/")


@pytest.fixture
async def news() -> AsyncIterator[tuple[NewsSite, str]]:
    site = NewsSite()
    async with serve(site.app()) as base:
        yield site, base


class Quotidien(Spider):
    """Sections from the nav, their pages, and every article listed: the CrawlSpider shape."""

    name = "quotidien"
    rules = [
        Rule(glob("/article/*/*/*.html"), callback="parse_article"),
        Rule(restrict_css="nav.sections"),
        Rule(r"/section/\w+/\?page=\d+$", restrict_css="main"),
    ]

    def parse_article(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {"title": response.css("h1::text").get(), "date": response.css("time::attr(datetime)").get()}


def listed_pages() -> set[str]:
    pages = {"/"} | {f"/section/{s}/" for s in SECTIONS} | {f"/section/{s}/?page={n}" for s in SECTIONS for n in (1, 2)}
    return pages | {a.path for a in articles() if not a.hidden}


async def test_rules_fetch_exactly_the_pages_they_name(news: tuple[NewsSite, str]) -> None:
    site, base = news
    items, stats = await collect(Quotidien, settings=SETTINGS, start_urls=[base + "/"])
    assert set(site.hits) == listed_pages()
    assert all(count == 1 for count in site.hits.values())  # fragments and repeats collapsed
    shown = {a.title: a.date for a in articles() if not a.hidden}
    assert {item["title"]: item["date"] for item in items} == shown  # windows-1252: €, quote and dash intact
    assert len(items) == 24
    assert site.hosts.keys() == {"127.0.0.1"}  # same-host: the localhost mirror link was not taken
    assert stats.requests_failed == 0  # no offsite, mailto: or binary request was even made:
    assert stats.dropped_by_reason.keys() == {"duplicate"}  # the nav, linked from every page
    assert_accounted(stats)


async def test_binary_links_get_no_request_unless_asked(news: tuple[NewsSite, str]) -> None:
    site, base = news

    class Everything(Spider):
        name = "everything"
        rules = [Rule()]

    _, stats = await collect(Everything, settings=SETTINGS, start_urls=[base + articles()[0].path])
    assert not [path for path in site.hits if path.startswith(NOT_PAGES)]
    assert site.hits["/tag/politique/"] == 1 and site.hits["/legal/mentions"] == 1  # the rest of the site
    assert stats.failed_by_reason == {"http 404": 1}  # the missing section, nothing else
    assert "unsupported scheme" not in stats.dropped_by_reason and "offsite" not in stats.dropped_by_reason

    site.hits.clear()
    _, stats = await collect(Everything, settings=SETTINGS, start_urls=[base + "/"], rules=[Rule(deny_extensions=())])
    assert {BINARY[0], BINARY[1], "/docs/article-1.pdf", "/media/photo-1.jpg"} <= set(site.hits)
    assert stats.failed_by_reason == {"http 404": 1}  # binary pages are followed, not parsed
    assert_accounted(stats)


async def test_deny_wins_and_first_matching_rule_takes_the_link(news: tuple[NewsSite, str]) -> None:
    site, base = news

    class Tagged(Spider):
        name = "tagged"
        rules = [
            Rule(deny=[r"/tag/", glob("/section/**"), r"[?&]print="], callback="parse_page", follow=True),
            Rule(glob("/tag/*/"), callback="parse_tag"),  # only sees what the first rule did not take
        ]

        def parse_page(self, response: Response) -> dict[str, str]:
            return {"kind": "page", "path": response.url.split("/", 3)[3]}

        def parse_tag(self, response: Response) -> dict[str, str]:
            return {"kind": "tag", "path": response.url.split("/", 3)[3]}

    items, _ = await collect(Tagged, settings=SETTINGS, start_urls=[base + "/"])
    assert not site.fetched("/section/") and not [p for p in site.hits if "print=" in p]
    tags = {item["path"] for item in items if item["kind"] == "tag"}
    assert tags == {"tag/politique/", "tag/m%C3%A9t%C3%A9o/", "tag/dossier-0/", "tag/dossier-1/", "tag/dossier-2/"}
    assert site.hits[articles()[24].path] == 0  # a hidden article: linked from tag pages, whose rule does not follow


async def test_follow_applies_the_rules_to_a_callbacks_pages(news: tuple[NewsSite, str]) -> None:
    site, base = news
    hidden, unreached = articles()[25].path, articles()[24].path
    await collect(Quotidien, settings=SETTINGS, start_urls=[base + "/"])
    assert site.hits[hidden] == 0  # the article rule's callback runs; its pages are not followed

    site.hits.clear()
    rules = [Quotidien.rules[0].replace(follow=True), *Quotidien.rules[1:]]
    items, _ = await collect(Quotidien, settings=SETTINGS, start_urls=[base + "/"], rules=rules)
    assert site.hits[hidden] == 1 and site.hits[unreached] == 0  # 24's related link leads to 26
    assert len(items) == 25


async def test_process_request_errback_and_cb_kwargs(news: tuple[NewsSite, str]) -> None:
    site, base = news

    class Hooks(Spider):
        name = "hooks"
        rules = [
            Rule(r"/article/", callback="parse_article", process_request="only_2024", cb_kwargs={"source": "rule"}),
            Rule(restrict_css="main", allow=r"/section/", errback="missing"),
        ]

        def only_2024(self, request: Request, response: Response) -> Request | None:
            if "/2023/" in request.url:
                return None
            request.meta["via"] = response.url
            return request

        def parse_article(self, response: Response, source: str) -> dict[str, Any]:
            return {"url": response.url, "source": source, "via": response.meta["via"]}

        def missing(self, failure: Any) -> Iterator[dict[str, str]]:
            yield {"missing": failure.request.url, "reason": failure.reason}

    items, stats = await collect(Hooks, settings=SETTINGS, start_urls=[base + "/"])
    fetched = {item["url"].removeprefix(base) for item in items if "url" in item}
    assert fetched == {a.path for a in articles()[:3] if a.date.startswith("2024")}
    assert {item["source"] for item in items if "url" in item} == {"rule"}
    assert {item["via"] for item in items if "via" in item} == {base + "/"}
    assert [item for item in items if "missing" in item] == [
        {"missing": base + "/section/faits-divers/", "reason": "http 404"}
    ]
    assert not site.fetched("/article/2023/")
    assert_accounted(stats)


async def test_follow_all_takes_rule_keywords(news: tuple[NewsSite, str]) -> None:
    site, base = news

    class OneOff(Spider):
        name = "oneoff"

        def parse(self, response: Response) -> Iterator[Request]:
            yield from response.follow_all(restrict_css="nav.sections", callback=self.parse_section)

        def parse_section(self, response: Response) -> Iterator[Request]:
            links = response.follow_all(css="ul.articles a", deny=r"/2023/", callback=self.parse_article)
            assert len(links) == len({a.path for a in listed(response.url.split("/")[-2])[:3]} - self.old)
            yield from links

        old = {a.path for a in articles() if a.date.startswith("2023")}

        def parse_article(self, response: Response) -> dict[str, str]:
            return {"url": response.url}

    items, _ = await collect(OneOff, settings=SETTINGS, start_urls=[base + "/"])
    expected = {a.path for s in SECTIONS for a in listed(s)[:3] if a.date.startswith("2024")}
    assert {item["url"].removeprefix(base) for item in items} == expected
    assert set(site.hits) == {"/"} | {f"/section/{s}/" for s in SECTIONS} | expected


PAGE = """<html><head><base href="https://news.test/fr/"></head><body>
<nav><a href="rubrique/a">A</a><a href="/x.PDF">pdf</a><a href="rubrique/a#top">A again</a></nav>
<main><a href="article/1.html">one</a><a href=" article/1.html#c ">one again</a><area href="/carte">
<a href="https://blog.news.test/p">blog</a><a href="https://other.test/p">other</a><a href="tel:+33">tel</a>
<a href="http://[bad">broken</a><a>no href</a><link href="/feed"></main></body></html>"""


def page() -> Response:
    return Response("https://news.test/fr/index.html", body=PAGE.encode(), headers={"Content-Type": "text/html"})


def urls(requests: list[Request]) -> list[str]:
    return [request.url for request in requests]


def test_follow_all_rule_resolves_dedupes_and_filters() -> None:
    response = page()
    assert urls(response.follow_all(rule=Rule())) == [
        "https://news.test/fr/rubrique/a",
        "https://news.test/fr/article/1.html",
        "https://news.test/carte",
    ]
    assert urls(response.follow_all(restrict_xpaths="//nav", deny_extensions=())) == [
        "https://news.test/fr/rubrique/a",
        "https://news.test/x.PDF",
    ]
    assert urls(response.follow_all(strategy="same-domain", allow=r"/p$")) == ["https://blog.news.test/p"]
    assert urls(response.follow_all(strategy="any", deny_domains=["news.test"])) == ["https://other.test/p"]
    assert urls(response.follow_all(tags=["link"], restrict_css="main")) == ["https://news.test/feed"]
    plain = response.follow_all(css="nav a")  # no rule: every href as before, duplicates and all
    assert len(plain) == 3


def test_follow_all_knows_every_rule_keyword() -> None:
    assert RULE_KEYWORDS == RULE_OPTIONS  # follow_all(strategy=...) takes the rule path, method=... does not


def test_follow_all_rule_requests_carry_their_options() -> None:
    response = page()

    def keep(request: Request, response: Response) -> Request | None:
        return request.replace(priority=5) if "article" in request.url else None

    rule = Rule(process_request=keep, cb_kwargs={"k": 1})
    (request,) = response.follow_all(rule=rule, meta={"m": 2})
    assert (request.url, request.priority, request.meta, request.cb_kwargs) == (
        "https://news.test/fr/article/1.html", 5, {"m": 2}, {"k": 1}
    )  # fmt: skip
    with pytest.raises(ConfigError, match="method name"):
        response.follow_all(rule=Rule(callback="parse_item"))
    with pytest.raises(TypeError, match="not both"):
        response.follow_all(rule=rule, deny="x")
    with pytest.raises(NotTextResponse):
        Response("https://news.test/a.pdf", body=b"%PDF-1.4").follow_all(rule=Rule())


@pytest.mark.parametrize(
    ("rule", "url", "skipped"),
    [
        (Rule(glob("/news/*.html")), "https://n.test/news/a.html", None),
        (Rule(glob("/news/*.html")), "https://n.test/news/2024/a.html", "no allow pattern"),  # * stops at /
        (Rule(glob("/news/**.html")), "https://n.test/news/2024/a.html", None),
        (Rule(glob("/search?q=*")), "https://n.test/search?q=eclaw", None),  # ? is literal
        (Rule(glob("/search?q=*")), "https://n.test/searchXq=eclaw", "no allow pattern"),
        (Rule(glob("https://*.n.test/**"), strategy="same-domain"), "https://blog.n.test/x/y", None),
        (Rule(r"/\d{4}/", deny=r"/2023/"), "https://n.test/2023/a", "deny pattern"),
        (Rule(re.compile(r"/NEWS/", re.I)), "https://n.test/news/a", None),
        (Rule(), "https://n.test/a/report.Pdf?download=1", "extension .pdf"),
        (Rule(), "https://n.test/archive.tar.gz", "extension .gz"),
        (Rule(), "https://n.test/v1.2/page", None),  # a dot in a directory is no extension
        (Rule(deny_extensions=["html"]), "https://n.test/a.html", "extension .html"),
        (Rule(), "https://other.test/", "other host"),
        (Rule(strategy="same-domain"), "https://shop.example.co.uk/", None),
        (Rule(strategy="same-domain"), "https://other.co.uk/", "other domain"),
        (Rule(strategy="any", allow_domains=["example.co.uk"]), "https://other.co.uk/", "domain not allowed"),
        (Rule(strategy="any", deny_domains=["example.co.uk"]), "https://a.example.co.uk/", "denied domain"),
    ],
)
def test_what_a_rule_skips(rule: Rule, url: str, skipped: str | None) -> None:
    pages = {"n.test": "https://n.test/", "example": "https://www.example.co.uk/", "other": "https://other.test/"}
    where = pages["example"] if "co.uk" in url else pages["n.test"]
    assert rule.skips(url, page=where) == skipped


def test_same_domain_of_an_ip_is_the_ip() -> None:
    assert Rule(strategy="same-domain").skips("http://127.0.0.2/", page="http://127.0.0.1/") == "other domain"
    assert Rule(strategy="same-domain").skips("http://127.0.0.1:81/", page="http://127.0.0.1/") is None
    assert {"pdf", "jpg", "zip", "mp4", "docx"} <= DEFAULT_DENY_EXTENSIONS and "html" not in DEFAULT_DENY_EXTENSIONS


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Rule(r"(unclosed"), r"Rule\(allow='\(unclosed'\) allow: bad regular expression"),
        (lambda: Rule(strategy="same-origin"), "strategy must be one of 'same-host', 'same-domain', 'any'"),
        (lambda: Rule(restrict_css="nav[["), "bad restrict_css/restrict_xpaths"),
        (lambda: Rule(allow_domains="http://news.test/"), "allow_domains entry 'http://news.test/' must be a host"),
        (lambda: Rule(allow=42), "42 is not a pattern"),  # type: ignore[arg-type]
        (lambda: Rule(callback=42), "callback must be a method name or a callable"),  # type: ignore[arg-type]
        (lambda: glob(""), "glob"),
    ],
)
def test_a_bad_rule_is_a_one_line_config_error(make: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        make()
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([Rule(callback="parse_missing")], "rules\\[0\\] callback 'parse_missing': spider Bad has no such method"),
        (Rule(), "rules must be a list of Rule"),
        ([r"/news/"], "rules\\[0\\] is '/news/', not a Rule"),
    ],
)
async def test_a_spider_with_bad_rules_fails_before_fetching(rules: Any, message: str) -> None:
    class Bad(Spider):
        name = "bad"
        start_urls = ["https://news.test/"]

    mock = MockFetcher({})
    with pytest.raises(ConfigError, match=message):
        await collect(Bad, engine=Engine(SETTINGS, fetcher=lambda: mock), rules=rules)
    assert mock.requests == []


async def test_rule_requests_survive_a_saved_frontier() -> None:
    spider = Quotidien()
    home = Response(
        "https://news.test/", body=b'<a href="/article/2024/01/x.html">x</a>', request=Request("https://news.test/")
    )
    (request,) = spider.parse(home)
    restored = loads(dumps(request, spider), spider)
    assert restored.callback == spider._parse_rule and restored.meta == {"rule": 0}
    answer = Response(restored.url, body=b"<h1>X</h1><time datetime='2024-01-01'>", request=restored)
    assert list(restored.callback(answer)) == [{"title": "X", "date": "2024-01-01"}]
