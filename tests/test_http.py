"""Request and Response."""

from __future__ import annotations

import pytest

from eclaw import Request, Response
from eclaw.exceptions import InvalidURL
from eclaw.http.selectors import uses_id


@pytest.mark.parametrize(
    "url",
    ["", "example.com/page", "/relative", "http://", "http:///path", "http://host:99999/", "http://[::1/"],
)
def test_malformed_urls_are_rejected(url: str) -> None:
    with pytest.raises(InvalidURL, match="malformed URL"):
        Request(url)


def test_urls_are_escaped_and_other_schemes_kept() -> None:
    assert Request("http://exämple.com/a b?q=ü").url == "http://xn--exmple-cua.com/a%20b?q=%C3%BC"
    assert Request("mailto:x@y.test").url == "mailto:x@y.test"
    assert Request("http://x.test/", method="post", body="data").method == "POST"
    assert Request("http://x.test/", body="data").body == b"data"


def test_replace_copies_mutable_fields() -> None:
    original = Request("http://x.test/", meta={"a": 1}, headers={"H": "1"})
    copy = original.replace(priority=5)
    copy.meta["a"] = 2
    copy.headers["H"] = "2"
    assert original.meta == {"a": 1} and original.headers == {"H": "1"} and copy.priority == 5
    assert copy.url == original.url and copy.meta == {"a": 2} and copy.callback is None
    moved = original.replace(url="http://x.test/a b", method="post", cb_kwargs={"k": 1})
    assert (moved.url, moved.method, moved.cb_kwargs, moved.meta) == ("http://x.test/a%20b", "POST", {"k": 1}, {"a": 1})
    with pytest.raises(TypeError, match="no field 'bogus'"):
        original.replace(bogus=1)
    with pytest.raises(TypeError, match="callback must be callable"):
        original.replace(callback="parse")


def html(body: bytes, content_type: str = "text/html", url: str = "http://shop.test/dir/page") -> Response:
    return Response(url, headers={"Content-Type": content_type}, body=body)


def test_text_from_header_charset() -> None:
    response = html("Привет".encode("cp1251"), "text/html; charset=windows-1251")
    assert response.text == "Привет"
    assert response.encoding == "cp1251"


def test_text_from_bom() -> None:
    assert html(b"\xef\xbb\xbfh\xc3\xa9").text == "hé"
    assert html(b"\xef\xbb\xbfh\xc3\xa9", "text/html; charset=cp1251").text == "hé"  # BOM wins
    assert html(b"\xff\xfe" + "hé".encode("utf-16-le")).text == "hé"


def test_text_from_meta_charset() -> None:
    body = '<html><head><meta charset="shift_jis"></head><body>日本語のページ</body></html>'.encode("shift_jis")
    assert "日本語のページ" in html(body).text
    body = '<meta http-equiv="Content-Type" content="text/html; charset=gbk"><p>中文网页内容</p>'.encode("gbk")
    assert "中文网页内容" in html(body).text


def test_text_detected_without_declaration() -> None:
    text = "<html><body><p>" + "Съешь же ещё этих мягких французских булок, да выпей чаю. " * 5 + "</p></body></html>"
    response = html(text.encode("cp1251"))
    assert "французских булок" in response.text


def test_selectors() -> None:
    response = html(
        b'<html><body><h1>Title</h1><ul><li><a href="/a">A</a></li><li><a href="b">B</a></li></ul></body></html>'
    )
    assert response.css("h1::text").get() == "Title"
    assert response.xpath("//a/@href").getall() == ["/a", "b"]
    assert response.css("li a::attr(href)").getall() == ["/a", "b"]


def test_soup_is_lazy_and_uses_lxml() -> None:
    response = html(b"<html><body><p class='x'>hello</p></body></html>")
    assert "soup" not in response.__dict__
    assert response.soup.find("p", class_="x").text == "hello"
    assert "soup" in response.__dict__


def test_json() -> None:
    assert Response("http://x.test/", body=b'{"a": [1, 2]}').json() == {"a": [1, 2]}


def test_urljoin_respects_base_href() -> None:
    assert html(b"<p>x</p>").urljoin("other") == "http://shop.test/dir/other"
    based = html(b'<html><head><base href="http://cdn.test/root/"></head></html>')
    assert based.urljoin("img.png") == "http://cdn.test/root/img.png"


def test_follow_and_follow_all() -> None:
    response = html(b'<a class="p" href="/x#frag">X</a><a class="p" href="y?b=1">Y</a><a class="p">no href</a>')
    first = response.follow(response.css("a.p")[0], meta={"k": 1})
    assert first.url == "http://shop.test/x#frag" and first.meta == {"k": 1}
    assert response.follow("../up").url == "http://shop.test/up"
    urls = [r.url for r in response.follow_all(css="a.p")]
    assert urls == ["http://shop.test/x#frag", "http://shop.test/dir/y?b=1"]
    assert [r.url for r in response.follow_all(xpath="//a/@href")] == urls
    assert [r.url for r in response.follow_all(css="a.p::attr(href)")] == urls
    mixed = html(b'<link href="/l"><a href=" /s p "></a><area href="/r"><a href="">e</a>')
    assert [r.url for r in mixed.follow_all(css="a, area, link")] == [
        "http://shop.test/l",
        "http://shop.test/s%20p",
        "http://shop.test/r",
    ]  # document order across a union; empty hrefs skipped; whitespace stripped
    assert [r.url for r in response.follow_all(["a", "b"])] == ["http://shop.test/dir/a", "http://shop.test/dir/b"]
    with pytest.raises(ValueError, match="exactly one"):
        response.follow_all(css="a", xpath="//a")


def test_response_url_drops_the_fragment_the_request_keeps_it() -> None:
    response = html(
        b'<a href="/p#a">1</a><a href="q.html#b">2</a><a href="#top">3</a>', url="http://d.test/lib/os.html#x"
    )
    assert response.url == "http://d.test/lib/os.html" and response.request.url == "http://d.test/lib/os.html#x"
    assert repr(response) == "<Response 200 http://d.test/lib/os.html>"
    assert response.urljoin("") == "http://d.test/lib/os.html"  # against the page, not the link that reached it
    assert response.urljoin("../c-api/buffer.html") == "http://d.test/c-api/buffer.html"
    # links keep their own fragments (the duplicate filter ignores them), on the fast and the general path
    expected = ["http://d.test/p#a", "http://d.test/lib/q.html#b", "http://d.test/lib/os.html#top"]
    assert [r.url for r in response.follow_all(css="a")] == expected
    assert [r.url for r in response.follow_all(css="a", priority=1)] == expected


def test_requests_built_on_fast_paths_equal_constructed_ones() -> None:
    # follow_all() and replace() set every slot by hand: a slot added later must be set there too.
    response = html(b'<a href="/p/1.html#r">x</a>', url="http://shop.test/")
    [fast] = response.follow_all(css="a", callback=test_follow_and_follow_all)
    made = Request("http://shop.test/p/1.html#r", callback=test_follow_and_follow_all)
    assert all(getattr(fast, name) == getattr(made, name) for name in Request.__slots__)
    made.meta["k"], made.priority, made.depth, made._id = 1, 2, 3, 4
    copy = made.replace(dont_filter=True)
    assert all(getattr(copy, n) == (True if n == "dont_filter" else getattr(made, n)) for n in Request.__slots__)


def test_utf8_pages_are_parsed_without_decoding_the_body() -> None:
    response = html(b'<meta charset="utf-8"><h1>caf\xc3\xa9</h1>')
    assert response.css("h1::text").get() == "café" and response.encoding == "utf-8"
    assert "_decoded" not in response.__dict__  # text was never needed
    assert response.text.endswith("café</h1>")


def test_xpath_id_function_works_though_pages_are_parsed_without_an_id_table() -> None:
    response = html(b'<div id="main"><p>one</p></div><p id="two">two</p>')
    assert response.xpath("id('main')/p/text()").get() == "one"
    assert response.xpath("//*[@id='two']/text()").get() == "two"
    assert response.css("#two::text").get() == "two"
    assert [r.url for r in response.follow_all(xpath="id('main')/../a/@href")] == []
    assert uses_id("id('a')") and uses_id("//div[ id ('a')]")
    assert not uses_id("//*[@id='a']") and not uses_id("//x[contains(@id, 'a')]") and not uses_id("//my-id(")


def test_query_results_are_the_selectors_parsel_would_make() -> None:
    from lxml import etree
    from parsel import Selector

    from eclaw.http.selectors import _selector

    for root, kind in ((etree.fromstring(b"<p>x</p>", etree.HTMLParser()), "html"), ("text", "text"), (2.0, "text")):
        made, fast = Selector(root=root, _expr="q", type=kind), _selector(root, "q")
        for name in Selector.__slots__:
            assert hasattr(made, name) == hasattr(fast, name), name
            assert getattr(made, name, None) == getattr(fast, name, None) or name == "__weakref__", name
