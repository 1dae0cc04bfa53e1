"""Settings: types, defaults, precedence, errors."""

from __future__ import annotations

from typing import Any

import pytest

from eclaw import ConfigError, Engine, Request, Response, Settings, Spider


def test_defaults_are_documented_and_valid() -> None:
    settings = Settings()
    assert settings.concurrency == 16
    assert settings.max_response_size == 10 * 1024 * 1024
    for name in Settings.names():
        assert f"{name}:" in (Settings.__doc__ or ""), f"setting {name} is not documented"


def test_replace_parses_strings_case_insensitively() -> None:
    settings = Settings().replace({"CONCURRENCY": "32", "cookies": "off", "download_delay": "0.5", "DUPEFILTER": "SET"})
    assert (settings.concurrency, settings.cookies, settings.download_delay, settings.dupefilter) == (
        32,
        False,
        0.5,
        "set",
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"concurency": "3"}, "unknown setting 'concurency' (did you mean 'concurrency'?)"),
        ({"concurrency": "many"}, "setting 'concurrency' must be an integer, got 'many'"),
        ({"cookies": "perhaps"}, "setting 'cookies' must be a boolean"),
        ({"dupefilter": "cuckoo"}, "setting 'dupefilter' must be one of 'bloom', 'set'"),
        ({"concurrency": 0}, "setting 'concurrency' must be at least 1"),
        ({"timeout": -1.0}, "setting 'timeout' must be positive"),
        ({"read_timeout": -1.0}, "setting 'read_timeout' must not be negative"),
        ({"concurrency": 2.5}, "setting 'concurrency' must be an integer"),
        ({"dupefilter_error_rate": 1.5}, "between 0 and 1"),
    ],
)
def test_bad_values_name_the_setting(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings().replace(values)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_settings_are_frozen() -> None:
    with pytest.raises(AttributeError):
        Settings().concurrency = 3  # type: ignore[misc]


def test_from_env() -> None:
    settings = Settings.from_env({"ECLAW_CONCURRENCY": "7", "ECLAW_USER_AGENT": "bot/1", "OTHER": "x"})
    assert settings.concurrency == 7 and settings.user_agent == "bot/1"
    with pytest.raises(ConfigError, match=r"environment ECLAW_\*: unknown setting 'NOPE'"):
        Settings.from_env({"ECLAW_NOPE": "1"})


class Custom(Spider):
    name = "custom"
    custom_settings = {"concurrency": 3, "max_depth": 2}

    def parse(self, response: Response) -> Any:
        return None


def test_precedence_engine_then_spider_then_overrides() -> None:
    crawl = Engine(Settings(concurrency=5, download_delay=1.0), overrides={"max_depth": "9"}).prepare(Custom)
    assert crawl.settings.concurrency == 3  # spider beats engine settings
    assert crawl.settings.download_delay == 1.0  # engine beats defaults
    assert crawl.settings.max_depth == 9  # overrides beat the spider


def test_bad_override_fails_at_engine_creation() -> None:
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        Engine(overrides={"colour": "red"})


def test_bad_spider_custom_setting_names_the_spider() -> None:
    class Wrong(Spider):
        name = "wrong"
        custom_settings = {"concurrency": "lots"}

    with pytest.raises(ConfigError, match="spider 'wrong': setting 'concurrency'"):
        Engine().prepare(Wrong)


def test_spider_validation_errors() -> None:
    class NoName(Spider):
        pass

    class StringList(Spider):
        name = "s"
        start_urls = "http://x.test/"  # type: ignore[assignment]

    class BadUrl(Spider):
        name = "b"
        start_urls = ["htp//broken"]

    class UrlDomain(Spider):
        name = "d"
        allowed_domains = ["http://x.test/"]

    with pytest.raises(ConfigError, match="spider NoName has no name"):
        NoName()
    with pytest.raises(ConfigError, match="start_urls must be a list"):
        StringList()
    with pytest.raises(ValueError, match="malformed URL 'htp//broken'"):
        BadUrl()
    with pytest.raises(ConfigError, match="must be a host, not a URL"):
        UrlDomain()


def test_allowed_domain_port_is_ignored() -> None:
    class Ported(Spider):
        name = "p"
        allowed_domains = ["Example.com:8080"]

    assert Ported().allowed_domains == ["example.com"]


def test_request_rejects_non_callable_callback() -> None:
    with pytest.raises(TypeError, match="callback must be callable"):
        Request("http://x.test/", callback="parse")  # type: ignore[arg-type]


def test_the_service_clients_variables_are_not_settings() -> None:
    """``ECLAW_SERVER`` and ``ECLAW_SERVE_TOKEN`` (eclaw serve's clients) never fail a crawl's settings."""
    environ = {"ECLAW_SERVE_TOKEN": "t0ken", "ECLAW_SERVER": "http://127.0.0.1:1", "ECLAW_RETRIES": "1"}
    settings = Settings.from_env(environ)
    assert settings.retries == 1
