"""Sitemaps: robots.txt, indexes, gzip, lastmod, namespaces and broken sitemaps, against the news site."""

from __future__ import annotations

import gzip
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, date, datetime
from typing import Any

import pytest

from eclaw import ConfigError, Engine, Request, Response, Settings, Spider
from eclaw.discovery import MAX_SITEMAP_SIZE, glob
from eclaw.discovery.sitemap_xml import gunzip, parse_date, read_sitemap
from eclaw.exceptions import SitemapError
from eclaw.testing import MockFetcher, collect, serve
from tests.conftest import assert_accounted
from tests.discoverysite import SECTIONS, SM, NewsSite, articles, url_entry, urlset

SETTINGS = Settings(store="", retries=0)
SITEMAPS = {"/robots.txt", "/sitemap_index.xml", "/sitemaps/articles-2023.xml.gz", "/sitemaps/articles-2024.xml.gz"}


@pytest.fixture
async def news() -> AsyncIterator[tuple[NewsSite, str]]:
    site = NewsSite()
    async with serve(site.app()) as base:
        yield site, base


class NewsSitemap(Spider):
    name = "news_sitemap"
    sitemap_rules = [(glob("**/article/**.html"), "parse_article"), (r"/section/\w+/$", "parse_section")]

    def parse_article(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {"kind": "article", "path": response.url.split("/", 3)[3], "title": response.css("h1::text").get()}

    def parse_section(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {"kind": "section", "path": response.url.split("/", 3)[3]}


def paths(items: list[dict[str, Any]], kind: str) -> set[str]:
    return {"/" + item["path"] for item in items if item["kind"] == kind}


async def test_from_robots_through_the_index_to_every_listed_page(news: tuple[NewsSite, str]) -> None:
    site, base = news
    items, stats = await collect(NewsSitemap, settings=SETTINGS, sitemap_urls=[base + "/robots.txt"])
    every = {a.path for a in articles()}
    assert paths(items, "article") == every  # hidden ones too: the sitemap lists them
    assert paths(items, "section") == {f"/section/{s}/" for s in SECTIONS}
    assert set(site.hits) == SITEMAPS | {"/sitemaps/sections.xml"} | every | {f"/section/{s}/" for s in SECTIONS}
    assert not site.fetched("/legal/") and not site.fetched("/media/") and not site.fetched("/en/")
    assert {item["title"] for item in items if item["kind"] == "article"} == {a.title for a in articles()}
    assert stats.requests_failed == stats.requests_dropped == 0
    assert_accounted(stats)


async def test_since_skips_old_sitemaps_and_old_pages(news: tuple[NewsSite, str]) -> None:
    site, base = news
    since = "2024-06-01"
    items, _ = await collect(
        NewsSitemap, settings=SETTINGS, sitemap_urls=[base + "/sitemap_index.xml"], sitemap_since=since
    )
    assert site.hits["/sitemaps/articles-2023.xml.gz"] == 0  # its lastmod (2023-12-31T23:00Z) is older
    assert paths(items, "article") == {a.path for a in articles() if a.date >= since}
    assert paths(items, "section") == {f"/section/{s}/" for s in SECTIONS}  # no lastmod: kept

    site.hits.clear()
    moment = datetime(2023, 12, 31, 23, 30, tzinfo=UTC)  # half an hour after the 2023 sitemap changed
    items, _ = await collect(
        NewsSitemap, settings=SETTINGS, sitemap_urls=[base + "/sitemap_index.xml"], sitemap_since=moment
    )
    assert site.hits["/sitemaps/articles-2023.xml.gz"] == 0
    assert paths(items, "article") == {a.path for a in articles() if a.date.startswith("2024")}


async def test_follow_and_alternate_links(news: tuple[NewsSite, str]) -> None:
    site, base = news
    items, _ = await collect(
        NewsSitemap,
        settings=SETTINGS,
        sitemap_urls=[base + "/sitemap_index.xml"],
        sitemap_follow=[r"articles-2024"],
        sitemap_alternate_links=True,
    )
    assert site.hits["/sitemaps/articles-2023.xml.gz"] == site.hits["/sitemaps/sections.xml"] == 0
    in_2024 = [a for a in articles() if a.date.startswith("2024")]
    english = {"/en" + a.path for a in in_2024 if a.id % 5 == 0}
    assert english and paths(items, "article") == {a.path for a in in_2024} | english
    assert not paths(items, "section")


async def test_broken_sitemaps_fail_with_a_reason_and_the_crawl_goes_on(
    news: tuple[NewsSite, str], caplog: pytest.LogCaptureFixture
) -> None:
    site, base = news
    names = ["not-xml.xml", "html.xml", "bomb.xml.gz", "corrupt.xml.gz", "truncated.xml", "xxe.xml", "ampersand.xml"]
    caplog.set_level(logging.WARNING, "eclaw.discovery")

    class Reader(Spider):
        name = "reader"
        sitemap_rules = [("", "parse_page")]

        def parse_page(self, response: Response) -> dict[str, str]:
            return {"path": response.url.split("/", 3)[3]}

    items, stats = await collect(Reader, settings=SETTINGS, sitemap_urls=[f"{base}/bad/{name}" for name in names])
    assert stats.failed_by_reason == {
        "bad sitemap: not XML": 1,
        "bad sitemap: not a sitemap": 1,
        "bad sitemap: too large": 1,
        "bad sitemap: bad gzip": 1,
    }
    assert (
        {item["path"] for item in items}
        == {
            articles()[0].path[1:],  # the truncated sitemap's complete entry (not the one cut mid-URL)
            articles()[1].path[1:],  # the XXE sitemap's real entry
            "section/monde/?page=2&x=1",  # escaped &
            "section/sport/?page=2&x=1",  # bare & (the parser's recovery would have cut it)
        }
    )
    assert site.hits["/secret"] == 0  # no external entity was fetched
    assert "truncated.xml is malformed" in caplog.text
    assert_accounted(stats)


class Reads(Spider):
    name = "reads"
    sitemap_urls = ["https://news.test/sitemap.xml"]

    def parse(self, response: Response) -> dict[str, str]:
        return {"url": response.url}


async def test_with_a_mock_fetcher_and_the_default_rule() -> None:
    pages = [url_entry("https://news.test", a) for a in articles()[:3]]

    def answer(request: Request) -> Response | str:
        if request.url.endswith(".xml"):
            return Response(request.url, body=urlset(pages), headers={"Content-Type": "text/xml"}, request=request)
        return "<h1>page</h1>"

    mock = MockFetcher(answer)
    items, _ = await collect(Reads, engine=Engine(SETTINGS, fetcher=lambda: mock))
    assert sorted(item["url"] for item in items) == sorted("https://news.test" + a.path for a in articles()[:3])


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"sitemap_since": "yesterday"}, "sitemap_since 'yesterday' is not a date"),
        ({"sitemap_since": 20240101}, "sitemap_since must be a date"),
        ({"sitemap_rules": [("", "parse_nothing")]}, r"sitemap_rules\[0\] callback 'parse_nothing'"),
        ({"sitemap_rules": [("", "parse", "extra")]}, r"sitemap_rules\[0\] must be a \(pattern, callback\) pair"),
        ({"sitemap_rules": [(r"(bad", "parse")]}, "bad regular expression"),
        ({"sitemap_follow": [42]}, "42 is not a pattern"),
        ({"sitemap_urls": ["ftp://news.test/sitemap.xml"]}, "not an http"),
        ({"sitemap_alternate_links": "maybe"}, "sitemap_alternate_links must be true or false"),
        ({"sitemap_alternate_links": "false", "sitemap_since": "2024-01-01"}, None),  # -a values are strings
        ({"sitemap_urls": "https://news.test/sitemap.xml"}, None),  # a string is split like -a values
    ],
)
async def test_bad_sitemap_settings_are_one_line_errors(attrs: dict[str, Any], message: str | None) -> None:
    mock = MockFetcher({})
    if message is None:
        await collect(Reads, engine=Engine(SETTINGS, fetcher=lambda: mock), **attrs)
        assert [r.url for r in mock.requests] == ["https://news.test/sitemap.xml"]
        return
    with pytest.raises(ConfigError, match=message) as caught:
        await collect(Reads, engine=Engine(SETTINGS, fetcher=lambda: mock), **attrs)
    assert "\n" not in str(caught.value) and mock.requests == []


def test_gunzip_is_bounded() -> None:
    data = gzip.compress(b"x" * 1001)
    assert gunzip(data, limit=1001) == b"x" * 1001
    with pytest.raises(SitemapError, match="over 1000 bytes uncompressed") as caught:
        gunzip(data, limit=1000)
    assert caught.value.reason == "bad sitemap: too large"
    assert MAX_SITEMAP_SIZE == 50 * 1024 * 1024


def test_entries_are_read_by_local_name_in_any_namespace() -> None:
    plain = b"<urlset><url><loc> https://a.test/1 </loc><lastmod>2024-05</lastmod></url></urlset>"
    prefixed = f'<sm:urlset xmlns:sm="{SM}"><sm:url><sm:loc>https://a.test/1</sm:loc></sm:url></sm:urlset>'.encode()
    assert [(e.loc, e.lastmod) for e in read_sitemap(plain).entries] == [
        ("https://a.test/1", datetime(2024, 5, 1, tzinfo=UTC))
    ]
    assert [e.loc for e in read_sitemap(prefixed).entries] == ["https://a.test/1"]
    nested = read_sitemap(urlset([url_entry("https://a.test", articles()[4])]))  # id 5: an alternate and an image
    assert [(e.loc, e.alternates) for e in nested.entries] == [
        ("https://a.test" + articles()[4].path, ("https://a.test/en" + articles()[4].path,))
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024", datetime(2024, 1, 1, tzinfo=UTC)),
        ("2024-05-17", datetime(2024, 5, 17, tzinfo=UTC)),
        ("2024-05-17T10:00+02:00", datetime(2024, 5, 17, 8, tzinfo=UTC)),
        ("2024-05-17T10:00:30.5Z", datetime(2024, 5, 17, 10, 0, 30, 500000, tzinfo=UTC)),
        (date(2024, 5, 17), datetime(2024, 5, 17, tzinfo=UTC)),
        ("17/05/2024", None),
        ("2024-13", None),
    ],
)
def test_lastmod_dates(text: Any, expected: datetime | None) -> None:
    assert parse_date(text) == expected


def test_xml_responses_match_names_without_namespaces() -> None:
    body = urlset([url_entry("https://a.test", a) for a in articles()[3:5]])
    response = Response("https://a.test/sitemap.xml", body=body, headers={"Content-Type": "application/xml"})
    locs = ["https://a.test" + a.path for a in articles()[3:5]]
    assert response.css("url > loc::text").getall() == locs
    assert response.xpath("//url/loc/text()").getall() == locs
    assert response.xpath("//link/@href").get() == "https://a.test/en" + articles()[4].path
    assert response.xpath("//sm:url/sm:loc/text()", namespaces={"sm": SM}).getall() == locs  # as written
    assert (
        response.xpath("//image:loc/text()", namespaces={}).getall()
        == [  # the document's own prefixes
            f"https://a.test/media/photo-{a.id}.jpg" for a in articles()[3:5]
        ]
    )
    assert response.xpath("//loc/text()", namespaces={}).getall() == []  # as written, unprefixed means no namespace
    response.selector.remove_namespaces()  # Scrapy code that does this keeps working
    assert response.xpath("count(//loc)").get() == "4.0"
