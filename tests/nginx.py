"""A real nginx serving a small multilingual glossary over HTTPS with HTTP/2, on 127.0.0.1.

The site is unlike the demo shop: term pages in UTF-8 and in ISO-8859-15, a long page
nginx gzips, a redirect chain, a loop, an offsite and a ``mailto:`` redirect, a 404, a
big file with a Content-Length, a decompression bomb, a page sent at 1 KB/s, a cookie.
The certificate is self-signed, made by openssl at start, for 127.0.0.1 and 127.0.0.2
(both served, so one crawl sees two hosts; 127.0.0.3 is served too, with a certificate
not its own). A second port answers only HTTP/2 clients (505 otherwise), as some front
ends do. nginx logs each request's protocol, host, status, content encoding, cookie and
browser headers to ``access.log`` (``Nginx.log()`` reads it).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.proxies import free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
FIELDS = ("protocol", "host", "status", "uri", "encoding", "cookie", "sec_ch_ua", "user_agent")

TERMS = {  # path: (language, term, definition, charset)
    "terms/cafe.html": ("fr", "café", "Boisson chaude ; aussi le lieu où on la boit.", "utf-8"),
    "terms/strasse.html": ("de", "Straße", "Öffentlicher Verkehrsweg für Fußgänger und Fahrzeuge.", "utf-8"),
    "terms/logos.html": ("el", "λόγος", "Λέξη, λόγος, σκέψη.", "utf-8"),
    "terms/goi.html": ("ja", "語彙", "ある言語で使われる単語の総体。", "utf-8"),
    "latin/euro.html": ("fr", "euro", "Monnaie commune : 1 € = 100 cents.", "iso-8859-15"),
    "latin/oeuvre.html": ("fr", "œuvre", "Ensemble des ouvrages d'un artiste ; « Œuvre complète ».", "iso-8859-15"),
    "terms/end.html": ("en", "destination", "The page at the end of a redirect chain.", "utf-8"),
}

CONF = """
{user}worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
    types {{ text/html html; application/octet-stream bin; }}
    default_type application/octet-stream;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    log_format fields escape=none '$server_protocol\\t$host\\t$status\\t$request_uri\\t$sent_http_content_encoding\\t'
                      '$cookie_lang\\t$http_sec_ch_ua\\t$http_user_agent';
    access_log {tmp}/access.log fields;
    ssl_certificate {tmp}/cert.pem;
    ssl_certificate_key {tmp}/key.pem;
    gzip on;
    gzip_min_length 1000;
    gzip_types text/html;
    server {{
        listen 127.0.0.1:{port} ssl{listen_http2};
        listen 127.0.0.2:{port} ssl{listen_http2};
        listen 127.0.0.3:{port} ssl{listen_http2};  # not in the certificate
        {http2}
        root {root};
        location = /old {{ return 301 /older; }}
        location = /older {{ return 302 /terms/end.html; }}
        location = /hop/3 {{ return 302 /hop/2; }}
        location = /hop/2 {{ return 302 /hop/1; }}
        location = /hop/1 {{ return 302 /terms/end.html; }}
        location = /loop/a {{ return 302 /loop/b; }}
        location = /loop/b {{ return 302 /loop/a; }}
        location = /away {{ return 302 https://elsewhere.test/; }}
        location = /mail {{ return 302 mailto:editor@glossary.test; }}
        location /latin/ {{ charset iso-8859-15; }}
        location = /slow.html {{ limit_rate 1k; }}
        location = /welcome.html {{ add_header Set-Cookie "lang=fr; Path=/"; }}
    }}
    server {{
        listen 127.0.0.1:{h2_port} ssl{listen_http2};
        {http2}
        root {root};
        if ($server_protocol != "HTTP/2.0") {{ return 505; }}
    }}
}}
"""


@dataclass(frozen=True)
class Nginx:
    """A running nginx: ``base`` (127.0.0.1), ``other`` (127.0.0.2, same server, also in the
    certificate), ``stranger`` (127.0.0.3, same server, not in the certificate), ``h2_only``."""

    base: str
    other: str
    stranger: str
    h2_only: str
    workdir: Path

    def log(self) -> list[dict[str, str]]:
        """The access log so far, one dict of :data:`FIELDS` per request."""
        path = self.workdir / "access.log"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        return [dict(zip(FIELDS, line.split("\t"), strict=True)) for line in lines]

    def logged(self, uri: str) -> dict[str, str]:
        """The last log line of ``uri``, waiting for it a little: nginx logs a request the client
        cut short only when it notices."""
        deadline = time.monotonic() + 2
        while True:
            lines = [line for line in self.log() if line["uri"] == uri]
            if lines or time.monotonic() > deadline:
                assert lines, f"nginx logged no request for {uri}"
                return lines[-1]
            time.sleep(0.01)


def _write_site(root: Path, other: str) -> None:
    links = [*(path for path in TERMS if path != "terms/end.html"), "old", "missing.html", "glossary.html"]
    links.append(f"{other}/terms/cafe.html")  # the same page on the other host
    (root / "terms").mkdir(parents=True)
    (root / "latin").mkdir()
    index = "".join(f'<li><a href="{link if "://" in link else "/" + link}">{link}</a></li>' for link in links)
    (root / "index.html").write_text(f'<meta charset="utf-8"><title>Glossaire</title><ul>{index}</ul>', "utf-8")
    for path, (lang, term, definition, charset) in TERMS.items():
        html = (
            f'<html lang="{lang}"><head><title>{term}</title></head><body>'
            f'<h1 class="term">{term}</h1><p class="definition">{definition}</p></body></html>'
        )
        (root / path).write_bytes(html.encode(charset))
    entries = "".join(f"<dt>mot {n}</dt><dd>définition numéro {n} du glossaire</dd>" for n in range(2000))
    (root / "glossary.html").write_text(f'<meta charset="utf-8"><h1>Tout</h1><dl>{entries}</dl>', "utf-8")
    (root / "welcome.html").write_text('<meta charset="utf-8"><h1>Bienvenue</h1>', "utf-8")
    (root / "slow.html").write_text("<p>" + os.urandom(20_000).hex() + "</p>", "ascii")  # gzip cannot shrink it much
    (root / "archive.bin").write_bytes(os.urandom(2 * 1024 * 1024))  # sent as is, with a Content-Length
    # 8 MB of markup that gzips to ~10 KB: a decompression bomb for a 1 MB max_response_size
    (root / "bomb.html").write_bytes(b"<p>" + b"a" * 8 * 1024 * 1024 + b"</p>")


def _certificate(workdir: Path) -> None:
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1,IP:127.0.0.2"),
            *("-keyout", str(workdir / "key.pem"), "-out", str(workdir / "cert.pem")),
        ],
        check=True,
        capture_output=True,
    )


def _http2_syntax() -> dict[str, str]:
    """nginx 1.25.1 turned ``listen ... http2`` into ``http2 on;`` (the old form still works, with a warning)."""
    out = subprocess.run([NGINX, "-v"], capture_output=True, text=True, check=True).stderr
    found = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", out)
    version = tuple(int(part) for part in found.groups()) if found else (0, 0, 0)
    if version >= (1, 25, 1):
        return {"listen_http2": "", "http2": "http2 on;"}
    return {"listen_http2": " http2", "http2": ""}


@contextmanager
def nginx(workdir: Path) -> Iterator[Nginx]:
    """Run nginx in the foreground on free ports until the block ends."""
    if not Path(NGINX).exists():
        raise RuntimeError("nginx is not installed (make test installs it: apt-get install nginx)")
    port, h2_port = free_port(), free_port()
    site = Nginx(*(f"https://127.0.0.{n}:{port}" for n in (1, 2, 3)), f"https://127.0.0.1:{h2_port}", workdir)
    _write_site(workdir / "site", site.other)
    _certificate(workdir)
    user = "user root;\n" if os.geteuid() == 0 else ""  # as root, workers would run as nobody: no access to tmp
    conf = workdir / "nginx.conf"
    options = _http2_syntax()
    conf.write_text(CONF.format(user=user, tmp=workdir, port=port, h2_port=h2_port, root=workdir / "site", **options))
    process = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(workdir)], stderr=subprocess.DEVNULL)
    try:
        _wait(process, workdir, port, h2_port)
        yield site
    finally:
        process.terminate()
        process.wait(5)


def _wait(process: subprocess.Popen[bytes], workdir: Path, *ports: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = workdir / "error.log"
            raise RuntimeError(f"nginx exited: {log.read_text().strip() if log.exists() else process.returncode}")
        pid = workdir / "nginx.pid"
        if pid.exists() and all(_listening(port) for port in ports):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nginx did not start on ports {ports}; see {workdir / 'error.log'}")


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
