"""Typed, frozen crawl settings.

Precedence (lowest first): defaults, ``ECLAW_<KEY>`` environment variables
(read only by the CLI and :func:`eclaw.run`, never by the library itself), the
``Settings`` passed to ``Engine``, the spider's ``custom_settings``, and the
``overrides`` given to ``Engine`` (the CLI's ``-s KEY=VALUE``).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import typing
from collections.abc import Mapping
from typing import Any, Literal

from eclaw._deprecated import renamed_setting
from eclaw.exceptions import ConfigError
from eclaw.setting_checks import check_values
from eclaw.setting_values import describe, host_map, instance_of, parse_as

__all__ = ["Settings", "host_map"]

# what bot walls put in the pages they answer with (Cloudflare, PerimeterX, Imperva, DataDome, Akamai...)
CHALLENGE_MARKERS = (
    r"(?i)captcha|challenge-platform|cf-chl|just a moment\.\.\.|attention required|_incapsula_resource"
    r"|datadome|px-block|access denied|are you a robot|unusual traffic"
)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Every knob of a crawl, validated on creation.

    Attributes:
        concurrency: downloads in flight at once, across all hosts. A page whose callback is still
            running (an ``async`` callback awaiting a slow service) keeps a place among 5 x concurrency:
            once that many pages are downloading or waiting for their callback, no download starts.
        concurrency_per_domain: downloads in flight at once per host.
        download_delay: seconds between two downloads from one host.
        connect_timeout: seconds to establish a connection.
        read_timeout: seconds to wait for the next chunk of a response; 0 (the default)
            means no limit of its own: ``timeout`` bounds the whole download, as in Scrapy.
        timeout: seconds for a whole download, redirects excluded.
        max_response_size: bytes (after decompression) above which a body is refused.
        keep_received: keep each response's exchange as on the wire in ``response.received``
            (``eclaw.http.wire``; per request: ``meta["keep_received"]``).
        files_store: where the files pipeline stores files (``eclaw.media``, docs: files): a directory, or a
            destination URI (``s3://bucket/prefix``, ``ftp://host/dir``, a plug-in's scheme); empty: none.
        files_expires: days a stored file stays up to date (not fetched again).
        files_urls_field: the item field naming the files to download.
        files_result_field: the item field the files pipeline fills in.
        files_max_size: bytes above which a file is refused (streamed: not held in memory).
        files_drop_failed: drop an item one of whose files failed (else it is stored, the failure noted).
        images_urls_field: the item field naming the images to download (``ImagesPipeline``).
        images_result_field: the item field the images pipeline fills in.
        images_thumbs: JPEG thumbnails to make, ``name=WIDTHxHEIGHT`` comma-separated
            (``small=50x50,big=270x270``); empty: none.
        images_min_width: images narrower than this (pixels, upright) are refused; 0: any.
        images_min_height: images lower than this are refused; 0: any.
        max_redirects: redirect hops followed before failing.
        max_depth: link depth limit; 0 means unlimited.
        max_url_length: longer URLs are dropped (and listed in ``drops``); servers take 8 KB.
        user_agent: the ``User-Agent`` of every request that does not set one;
            empty means the ``UserAgent`` middleware's realistic browser UA.
        cookies: keep cookies, in a jar per ``meta["cookiejar"]`` (one default jar per crawl).
        verify_tls: check TLS certificates (off for sites with self-signed ones).
        frontier_memory: pending requests kept in memory; more wait on disk (0 = no limit).
        dupefilter: ``"bloom"`` (bounded memory) or ``"set"`` (exact, small crawls).
        dupefilter_capacity: URLs the Bloom filter is sized for; it grows past it.
        dupefilter_error_rate: Bloom filter false-positive rate: the share of new URLs
            wrongly dropped as duplicates (one in a million by default).
        dead_letter: JSONL file of items an output (or validation, or a pipeline) failed on
            (``{spider}``, ``{run_key}`` filled in; each run starts it afresh, a resume goes on).
        store: the SQLite store (``{spider}``, ``{run_key}``, ``{date}`` filled in):
            items go there when no output is given (CLI, ``eclaw.run``), and every
            such crawl records a run row with its data-quality profile; empty is off.
        run_key: names this run's output: key-less items of the same run key are
            replaced by a re-run, and output paths may use ``{run_key}``.
        outputs: output specs separated by spaces, as ``-o`` takes them (``items.jsonl.gz -``), for a
            crawl given none (no ``-o``, no ``Engine(outputs=...)``); empty: the ``store``.
        output_batch_items: rotate outputs with ``%(batch)05d`` in their path every N items.
        output_batch_bytes: ... or every N bytes.
        output_partition_by: comma-separated fields partitioning Parquet outputs (hive-style).
        quality_count_ratio: warn when a type's item count moves more than this
            fraction from the previous run.
        failures: JSONL file of final request failures (url, reason, attempts,
            last status); empty turns it off. Like ``dead_letter`` and ``drops``, every line
            names the spider and the run, and a new run (not a resume) starts it afresh.
        drops: JSONL file of in-scope requests dropped by a policy (url too long, max depth,
            robots, offsite redirect, a middleware's ``IgnoreRequest``); empty turns it off.
        retries: retries after a failed attempt (``Retry`` middleware); 0 turns retrying off.
        dns_resolver: "system" (the default) or "async" (c-ares via aiodns, a TTL cache shared by the crawl,
            names in /etc/hosts not read: DNS only; docs/performance.md).
        dns_servers: DNS servers for the async resolver, comma-separated "ip" or "ip:port"; empty:
            the system's.
        dns_cache_ttl_min: shortest time (s) an answer is cached (its TTL is raised to this).
        dns_cache_ttl_max: longest time (s) an answer is cached (its TTL is cut to this).
        dns_negative_ttl: how long (s) NXDOMAIN / no answer is cached.
        dns_max_in_flight: DNS lookups in flight at once (500: a busy loop reads each answer late).
        dns_retries: tries again after a DNS timeout or server failure (NXDOMAIN is never
            retried; a failed lookup has reason ``dns``).
        obey_robots: fetch and obey robots.txt (``Robots`` middleware).
        autothrottle: adapt each host's delay to its latency (``Throttle`` middleware).
        http_cache: directory of an ``HttpCache`` for development; empty is off.
        incremental: a re-run asks the server whether each page it fetched before changed
            (``If-None-Match`` / ``If-Modified-Since``, the validators kept in
            ``eclaw-data/{spider}/recrawl``, or in ``http_cache``): a ``304`` is answered from
            what was kept, so only what moved is downloaded.
        proxies: ``Proxy`` middleware source: comma-separated proxy URLs, a
            file of them (``@path``), or ``env`` for ``HTTP(S)_PROXY``; empty is off.
        shutdown_timeout: seconds in-flight downloads get after a stop request.
        state_dir: directory where the crawl saves its state (frontier, dupe
            filter, output offsets, stats) to resume after a pause or a crash;
            empty is off (CLI ``--state DIR``).
        checkpoint_interval: seconds between two saves of the state.
        checkpoint_requests: new requests that trigger a save before the interval is up.
        frontier_url: ``redis://host:port/db``: the frontier, dupe filter, items
            and stats live in Redis, shared by every worker of the crawl (CLI ``--redis``).
        lease_timeout: seconds without a heartbeat after which a worker's requests go
            back to the queue; also how long a worker retries a lost Redis before pausing.
        log_level: logging level name used by the CLI.
        log_format: ``text`` or ``json`` (one object per line) for ``log_file``
            and the CLI's console.
        log_file: also log this crawl to this file (lines carry spider, run id and request id).
        trace: write every event of the crawl to this JSONL file (``eclaw trace``, ``eclaw report`` read it).
        metrics_port: serve Prometheus metrics on 127.0.0.1 at this port (0: off).
        monitors_results: the monitors' results file (``{spider}``, ``{run_key}`` filled in), over the
            ``results`` of a monitors file; empty: that one (``eclaw serve`` gives each job its own).
        host_concurrency: per-host limits over ``concurrency_per_domain``: ``"a.example=2,b.example=1"``
            (cluster-wide with ``frontier_url``, like every politeness setting).
        host_delay: per-host delays over ``download_delay``, seconds: ``"a.example=1.5,b.example=5"``;
            a floor the throttle never goes under.
        max_pages: start at most this many downloads in this run, retries included (0: no limit);
            then stop (``max pages``).
        max_items: ... after this many items stored in this run (``max items``).
        max_seconds: ... after this many seconds (``max seconds``).
        max_errors: ... after this many requests failed for good in this run (``max errors``).
        max_idle_items_seconds: ... when no item was stored for this many seconds (``no new items``).
        max_memory_mb: when the process's memory passes this many MB, stop scheduling, let the
            downloads under way finish and stop (``memory ceiling``; with ``state_dir`` the crawl
            is saved and the same command resumes it).
        impersonate: the browser the ``impersonate`` fetcher passes for, TLS and HTTP/2 fingerprint
            and headers (a curl_cffi target: ``chrome``, the newest Chrome it knows, ``firefox``,
            ``safari``, ``edge``, or a version such as ``chrome146``).
        fetchers: the fetcher of each host for requests that name none, ``host=fetcher`` pairs
            separated by commas (``example.com=impersonate,shop.test=browser``; a host covers
            its subdomains); it wins over the spider's ``fetcher``.
        referer: send the page a request was found on as its ``Referer`` (never from https to http).
        meta_refresh: follow ``<meta http-equiv="refresh">`` like a redirect.
        meta_refresh_max_delay: seconds; a refresh that waits longer is not followed.
        http_auth: HTTP basic auth per host, ``user:password@host[:port]`` comma-separated
            (percent-escape ``@ : ,`` in names and passwords); sent to that host only, never logged.
        sessions: size of a session pool (``Sessions`` middleware: a cookie jar, user agent and
            proxy per session, a banned session retired); 0 is off.
        browser_executable: (the browser fetcher, ``render=True``, docs/browser.md) the Chromium
            (or Chrome) program; empty finds ``chromium`` on the PATH.
        browser_pages: pages open at once in the browser.
        browser_context_pages: pages a browser context serves before it is recycled (its cookies
            and storage go on in the next one), so memory stays flat; 0 never recycles. A context
            whose page got a 403 or 429 is recycled at once, without its cookies.
        browser_contexts: idle browser contexts (one per proxy and context name) kept open.
        browser_block: comma-separated resource types the browser does not fetch (``image``,
            ``font``, ``media``, ``stylesheet``, ``script``, ``xhr``, ``fetch``, ``websocket``...).
        browser_block_urls: comma-separated URL patterns (``*`` matches anything) not fetched either.
        browser_timeout: seconds for a page: its navigation and its actions together.
        browser_xhr_bytes: bytes of JSON answers to the page's XHR/fetch requests kept for the
            callback (``response.meta["xhr"]``) per page; 0 keeps none.
        browser_screenshots: directory of screenshots of the pages that failed (``{spider}``,
            ``{run_key}`` filled in); empty is off.
        browser_screenshots_max: screenshots taken per crawl at most.
        snapshots: folder of error snapshots (dev loop, docs/devloop.md): a page whose callback
            raised, or that yielded no item where the spider expects some (``expect_items``),
            is saved there (request, response headers and body, traceback) and the failure's
            log line names it; ``{spider}``, ``{run_key}`` filled in; empty is off.
        snapshots_max: snapshots the folder keeps (a run keeps its first ones, evicting older runs').
        snapshots_max_bytes: ... and bytes.
        ladder: the escalation ladder (docs/ladder.md): fetchers lowest first, such as
            ``plain,impersonate,browser``; a host moves one rung up when banned (a 403/429/503 with
            a challenge marker, the spider's ``is_banned``) and one down after ``ladder_quiet``
            seconds without a ban; a page with no items where ``expect_items`` wants some climbs
            alone (its host follows once most of its pages do); empty is off.
        ladder_quiet: seconds without a ban before a host drifts one rung down (doubled each time
            it is banned again on the rung it came down to).
        ladder_ban_pattern: the challenge markers searched in a 403/429/503 page (a regex).
        sensitive_headers: comma-separated request headers treated like ``Authorization`` (docs/security.md):
            kept to the origin (scheme, host, port) they were set for, never sent over http once a
            request's chain was https, and shown as ``***`` in everything eclaw writes. Always
            sensitive: ``Authorization``, ``Proxy-Authorization``, ``Cookie``, ``X-Api-Key``,
            ``X-Auth-Token``, ``Api-Key``.
        robots_max_bytes: bytes of a robots.txt read; the rest is ignored (RFC 9309 allows 500 KiB).
        sitemap_max_depth: sitemap indexes followed inside one another at most (a deeper one is dropped,
            ``sitemap too deep``).
        sitemap_max_urls: URLs taken from one sitemap document at most (the rest dropped, ``sitemap too
            many URLs``; the sitemap protocol allows 50,000).
        max_links_per_page: requests taken from one page's callback at most (the rest dropped, ``too many
            links``); 0: no limit (a page's requests stream into the frontier either way).

    A budget stops the crawl gracefully, like Ctrl-C: with ``state_dir`` it is a pause, and
    running the same command again goes on, with a fresh budget for the new run.
    """

    concurrency: int = 16
    concurrency_per_domain: int = 8
    download_delay: float = 0.0
    connect_timeout: float = 10.0
    read_timeout: float = 0.0
    timeout: float = 60.0
    max_response_size: int = 10 * 1024 * 1024
    keep_received: bool = False
    files_store: str = ""
    files_expires: float = 90.0
    files_urls_field: str = "file_urls"
    files_result_field: str = "files"
    files_max_size: int = 1024 * 1024 * 1024
    files_drop_failed: bool = False
    images_urls_field: str = "image_urls"
    images_result_field: str = "images"
    images_thumbs: str = ""
    images_min_width: int = 0
    images_min_height: int = 0
    max_redirects: int = 10
    max_depth: int = 0
    max_url_length: int = 8192
    user_agent: str = ""
    cookies: bool = True
    verify_tls: bool = True
    frontier_memory: int = 10_000
    dupefilter: Literal["bloom", "set"] = "bloom"
    dupefilter_capacity: int = 1_000_000
    dupefilter_error_rate: float = 1e-6
    dead_letter: str = "eclaw-data/{spider}/dead-letter.jsonl"
    store: str = "eclaw-data/{spider}.sqlite"
    run_key: str = "default"
    outputs: str = ""
    output_batch_items: int = 0
    output_batch_bytes: int = 0
    output_partition_by: str = ""
    quality_count_ratio: float = 0.3
    failures: str = "eclaw-data/{spider}/failures.jsonl"
    drops: str = "eclaw-data/{spider}/drops.jsonl"
    retries: int = 3
    dns_resolver: Literal["async", "system"] = "system"
    dns_servers: str = ""
    dns_cache_ttl_min: float = 30.0
    dns_cache_ttl_max: float = 3600.0
    dns_negative_ttl: float = 30.0
    dns_max_in_flight: int = 500
    dns_retries: int = 1
    obey_robots: bool = False
    autothrottle: bool = False
    http_cache: str = ""
    incremental: bool = False
    proxies: str = ""
    shutdown_timeout: float = 10.0
    state_dir: str = ""
    checkpoint_interval: float = 5.0
    checkpoint_requests: int = 20_000
    frontier_url: str = ""
    lease_timeout: float = 30.0
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    log_file: str = ""
    trace: str = ""
    metrics_port: int = 0
    monitors_results: str = ""
    # -- per-host politeness and crawl budgets
    host_concurrency: str = ""
    host_delay: str = ""
    max_pages: int = 0
    max_items: int = 0
    max_seconds: float = 0.0
    max_errors: int = 0
    max_idle_items_seconds: float = 0.0
    max_memory_mb: int = 0
    # fetchers: the impersonating one and the choice per host (issue 19)
    impersonate: str = "chrome"
    fetchers: str = ""
    # forms, cookies and sessions (issue 18)
    referer: bool = True
    meta_refresh: bool = True
    meta_refresh_max_delay: float = 100.0
    http_auth: str = dataclasses.field(default="", repr=False)  # holds passwords
    sessions: int = 0
    # the browser fetcher (eclaw.fetchers.browser)
    browser_executable: str = ""
    browser_pages: int = 4
    browser_context_pages: int = 100
    browser_contexts: int = 8
    browser_block: str = "image,font,media"
    browser_block_urls: str = ""
    browser_timeout: float = 30.0
    browser_xhr_bytes: int = 1_048_576
    browser_screenshots: str = "eclaw-data/{spider}/screenshots"
    browser_screenshots_max: int = 20
    # -- dev loop: error snapshots
    snapshots: str = "eclaw-data/{spider}/snapshots"
    snapshots_max: int = 50
    snapshots_max_bytes: int = 50_000_000
    # -- the escalation ladder (issue 19)
    ladder: str = ""
    ladder_quiet: float = 300.0
    ladder_ban_pattern: str = CHALLENGE_MARKERS
    # security and bounds (docs/security.md)
    sensitive_headers: str = ""
    robots_max_bytes: int = 500 * 1024
    sitemap_max_depth: int = 10
    sitemap_max_urls: int = 50_000
    max_links_per_page: int = 0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            kind = _types()[field.name]
            if not instance_of(value, kind):
                raise ConfigError(f"setting {field.name!r} must be {describe(kind)}, got {value!r}")
        check_values(self)

    def replace(self, values: Mapping[str, Any] | None = None, /, **changes: Any) -> Settings:
        """A copy with ``values``/``changes`` applied.

        Keys are case-insensitive; strings are parsed to the setting's type (so
        ``{"CONCURRENCY": "32"}`` works). An unknown key or a bad value raises
        :class:`ConfigError` naming it.
        """
        merged = {**(values or {}), **changes}
        if not merged:
            return self
        parsed = {}
        for key, value in merged.items():
            name = _field_name(key)
            parsed[name] = parse_value(name, value) if isinstance(value, str) else value
        return dataclasses.replace(self, **parsed)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Defaults overridden by ``ECLAW_<KEY>`` variables (``ECLAW_CONCURRENCY=32``); the service's client
        variables (``ECLAW_SERVER``, ``ECLAW_SERVE_TOKEN``) are not settings."""
        env = os.environ if environ is None else environ
        values = {k[len("ECLAW_") :]: v for k, v in env.items() if k.startswith("ECLAW_") and k not in _NOT_SETTINGS}
        try:
            return cls().replace(values)
        except ConfigError as exc:
            raise ConfigError(f"environment ECLAW_*: {exc}") from None

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]


_NOT_SETTINGS = frozenset({"ECLAW_SERVER", "ECLAW_SERVE_TOKEN"})  # read by eclaw serve and its clients


def _field_name(key: str) -> str:
    name = renamed_setting(key.strip().lower().replace("-", "_"))
    if name in _types():
        return name
    hint = difflib.get_close_matches(name, _types(), n=1)
    suffix = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise ConfigError(f"unknown setting {key!r}{suffix}")


def parse_value(name: str, raw: str) -> Any:
    """Parse the string ``raw`` (CLI or environment) to setting ``name``'s type."""
    return parse_as(_types()[_field_name(name)], name, raw)


_TYPES: dict[str, Any] = {}


def _types() -> dict[str, Any]:
    if not _TYPES:
        _TYPES.update(typing.get_type_hints(Settings))
    return _TYPES
