"""Fast URL paths agree with the w3lib/urllib reference on random URLs."""

from __future__ import annotations

import contextlib
import random
from urllib.parse import urljoin

from w3lib.url import canonicalize_url, safe_url_string

from eclaw.http.urls import absolute_url, canonical_url, join_url, safe_url, simple_path, url_host

PIECES = [
    "a",
    "B",
    "0",
    "-",
    ".",
    "_",
    "~",
    "/",
    "?",
    "&",
    "=",
    ":",
    ";",
    ",",
    "+",
    "!",
    "$",
    "'",
    "(",
    ")",
    "*",
    "@",
    "#",
    "%",
    "%7e",
    "%41",
    " ",
    "é",
    "[",
    "]",
    "..",
    "/./",
    "//",
    "\\",
]
HOSTS = ["shop.test", "Shop.TEST", "127.0.0.1", "h", "xn--e1afmkfd.test", "bücher.test"]
PORTS = ["", ":80", ":443", ":8080", ":99999"]


def random_url(rng: random.Random) -> str:
    tail = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
    return f"{rng.choice(['http', 'https', 'HTTP'])}://{rng.choice(HOSTS)}{rng.choice(PORTS)}/{tail}"


def reference_canonical(url: str) -> str:
    canon = canonicalize_url(url)
    scheme, sep, rest = canon.partition("://")
    port = {"http": ":80", "https": ":443"}.get(scheme)
    host, slash, path = rest.partition("/")
    if port and host.endswith(port):
        host = host[: -len(port)]
    return f"{scheme}{sep}{host}{slash}{path}"


def test_fast_paths_match_reference() -> None:
    rng = random.Random(7)
    for _ in range(20000):
        url = random_url(rng)
        try:
            expected = safe_url_string(url)
        except ValueError:
            continue
        assert safe_url(url) == expected, url
        assert absolute_url(url) == expected, url
        with contextlib.suppress(ValueError):
            assert canonical_url(expected) == reference_canonical(expected), expected


def test_plain_variants_canonicalise_alike() -> None:
    assert canonical_url("http://h/p?b=2&a=1#x") == canonical_url("HTTP://H:80/p?a=1&b=2") == "http://h/p?a=1&b=2"
    assert canonical_url("http://h/%7Euser?z&a=1") == canonical_url("http://h/~user?a=1&z=")
    assert canonical_url("http://h/a/../b") == canonical_url("http://h/b")


def test_join_matches_urljoin() -> None:
    base = "http://shop.test:8080/dir/page.html?q=1"
    for href in [
        "/a",
        "/a?b#c",
        "b",
        "../c",
        "//other.test/x",
        "http://x.test/y",
        "https://x.test",
        "?z",
        "#f",
        "/a/./b",
        "/a/../b",
        "",
        "mailto:x@y",
    ]:
        assert join_url(base, "http://shop.test:8080", href) == urljoin(base, href), href


def test_url_host() -> None:
    assert url_host("http://Shop.Test:8080/x") == "shop.test"
    assert url_host("https://user:pw@Example.com/") == "example.com"
    assert url_host("http://[::1]:80/") == "::1"
    assert url_host("mailto:x@y.test") == ""


def test_simple_path_is_safe_as_is() -> None:
    rng = random.Random(3)
    origin = "http://shop.test:8080"
    for _ in range(20000):
        href = "/" + "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 10)))
        if simple_path(href):
            assert safe_url_string(origin + href) == origin + href, href
            assert absolute_url(origin + href) == origin + href, href
            assert urljoin(origin + "/dir/x", href) == origin + href, href
