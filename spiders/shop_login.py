"""Sign in to the demo shop through its login form (its CSRF token comes along) and read the
members-only account page: the products of the member's orders.

    eclaw demo --serve --port 8080 &
    eclaw crawl spiders/shop_login.py -a base_url=http://127.0.0.1:8080 -o account.jsonl
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from eclaw import CloseSpider, Request, Response, Spider


class ShopLoginSpider(Spider):
    name = "shop_login"
    base_url = "http://127.0.0.1:8080"
    username = "demo"
    password = "demo-pass"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = self.base_url.rstrip("/")
        self.allowed_domains = [urlsplit(self.base_url).hostname or ""]
        self.start_urls = [self.base_url + "/login"]

    def parse(self, response: Response) -> Iterator[Request]:
        # The form's hidden csrf_token is sent as it is; only the credentials are ours. The shop
        # answers with a redirect to /account and a session cookie, which the crawl keeps.
        credentials = {"username": self.username, "password": self.password}
        yield Request.from_form(response, credentials, formid="login", callback=self.parse_account)

    def parse_account(self, response: Response) -> Iterator[dict[str, Any] | Request]:
        if response.css("form#login"):
            raise CloseSpider("login failed: " + (response.css(".error::text").get() or "no account page"))
        yield {"member": response.css(".member::text").get(), "orders": len(response.css("li.order"))}
        yield from response.follow_all(css="li.order a", callback=self.parse_ordered)

    def parse_ordered(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {"ordered": response.css(".sku::text").get(), "title": response.css("h1.title::text").get()}
