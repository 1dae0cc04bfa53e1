"""The benchmark site: a deterministic static product catalogue.

Page ``/p/<i>.html`` for i in [0, N) is a product page of 8-15 KB with a
title, price and SKU, and 20-40 links: its two children in a binary tree
(so every page is reachable from ``/p/0.html``), random other products, the
same links again with fragments, off-site links and a ``mailto:`` link.

Served by nginx pinned to CPU 0 when nginx is available, else (with a
warning) by a small aiohttp static server.
"""

from __future__ import annotations

import contextlib
import html
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

WORDS = [
    "sturdy",
    "light",
    "compact",
    "classic",
    "modern",
    "durable",
    "premium",
    "handmade",
    "eco",
    "quiet",
    "fast",
    "smart",
    "portable",
    "steel",
    "oak",
    "cotton",
    "glass",
    "ceramic",
    "leather",
    "wool",
    "bamboo",
    "copper",
    "linen",
    "walnut",
    "granite",
]


def product(i: int) -> dict[str, object]:
    """The fields a crawler must extract from page ``i``."""
    rng = random.Random(i * 7919 + 17)
    title = f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()} Product {i}"
    return {"sku": f"SKU-{i:06d}", "title": title, "price": round(rng.uniform(1, 999), 2)}


def render(i: int, pages: int) -> str:
    rng = random.Random(i)
    fields = product(i)
    links = [f"/p/{c}.html" for c in (2 * i + 1, 2 * i + 2) if c < pages]
    links += [f"/p/{rng.randrange(pages)}.html" for _ in range(rng.randint(12, 24))]
    links += [f"{link}#reviews" for link in links[:3]]  # fragments: duplicates after canonicalisation
    links += [links[0]] if links else []  # a plain duplicate
    links += [f"http://shop{rng.randrange(5)}.offsite.invalid/p/{rng.randrange(99)}" for _ in range(3)]
    links += ["mailto:sales@offsite.invalid", "/p/0.html"]
    rng.shuffle(links)
    anchors = "\n".join(f'<li><a href="{html.escape(href)}">link {n}</a></li>' for n, href in enumerate(links))
    target = rng.randint(8 * 1024, 15 * 1024 - 150)
    page = _PAGE.format(
        i=i, title=fields["title"], price=fields["price"], sku=fields["sku"], anchors=anchors, filler=""
    )
    filler: list[str] = []
    size = len(page)
    while size < target:
        sentence = " ".join(rng.choice(WORDS) for _ in range(14)).capitalize() + ". "
        filler.append(sentence)
        size += len(sentence)
    return _PAGE.format(
        i=i, title=fields["title"], price=fields["price"], sku=fields["sku"], anchors=anchors, filler="".join(filler)
    )


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title} | Bench Shop</title>
<meta name="description" content="Benchmark catalogue page {i}"></head>
<body><header><nav><a href="/p/0.html">Home</a></nav></header>
<main><article class="product">
<h1 class="title">{title}</h1>
<p>Price: <span class="price">{price:.2f}</span> &middot; SKU: <span class="sku">{sku}</span></p>
<div class="description"><p>{filler}</p></div>
<ul class="links">
{anchors}
</ul></article></main>
<footer><p>Bench Shop, a generated catalogue.</p></footer></body></html>
"""


def generate(pages: int, root: Path) -> Path:
    """Write the catalogue of ``pages`` pages under ``root`` (cached by page count)."""
    site = root / f"site-{pages}"
    marker = site / ".complete"
    if marker.exists():
        return site
    if site.exists():
        shutil.rmtree(site)
    (site / "p").mkdir(parents=True)
    for i in range(pages):
        (site / "p" / f"{i}.html").write_text(render(i, pages), encoding="utf-8")
    marker.write_text(str(pages))
    return site


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


NGINX_CONF = """
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    keepalive_timeout 65;
    types {{ text/html html; }}
    default_type text/html;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location / {{ try_files $uri =404; }}
    }}
}}
"""


def taskset(cpu: int) -> list[str]:
    """A ``taskset`` prefix pinning to ``cpu``, if possible here."""
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(cpu)]
    return []


@contextlib.contextmanager
def serve(site: Path, cpu: int = 0) -> Iterator[tuple[str, str]]:
    """Serve ``site``; yields (base URL, server name)."""
    port = free_port()
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    with tempfile.TemporaryDirectory(prefix="eclaw-bench-") as tmp:
        if nginx:
            conf = Path(tmp) / "nginx.conf"
            conf.write_text(NGINX_CONF.format(tmp=tmp, port=port, root=site.resolve()))
            command = [*taskset(cpu), nginx, "-c", str(conf), "-p", tmp]
            name = "nginx"
        else:
            print("WARNING: nginx not found; serving with aiohttp (slower, noisier)", file=sys.stderr)
            command = [*taskset(cpu), sys.executable, "-m", "bench.static_server", str(site), str(port)]
            name = "aiohttp"
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait_listening(port, process)
            yield f"http://127.0.0.1:{port}", name
        finally:
            process.send_signal(signal.SIGTERM if name == "aiohttp" else signal.SIGQUIT)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"site server exited: {err.strip()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"site server did not listen on {port}")


@contextlib.contextmanager
def app_process(module: str, *args: str) -> Iterator[str]:
    """Run ``python -m module [args] --serve PORT`` (an aiohttp site of a benchmark) in its own
    process, so only the crawler's memory is measured; yields its base URL."""
    port = free_port()
    root = Path(__file__).resolve().parent.parent  # where ``bench`` is importable from, whatever the cwd
    server = subprocess.Popen([sys.executable, "-m", module, *args, "--serve", str(port)], cwd=root)
    try:
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError(f"the {module} site did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait()
