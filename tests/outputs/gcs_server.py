"""A real GCS JSON API server for the tests: gcp-storage-emulator (PyPI) on a free 127.0.0.1 port, in a thread.

It speaks the JSON API eclaw's ``gs://`` destination uses: buckets.get, media/multipart and resumable
uploads, objects.list, compose, delete, download. Its objects live in memory; a restarted server is empty.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.outputs.servers import free_port


@contextmanager
def gcs_emulator(port: int = 0, buckets: tuple[str, ...] = ("items",)) -> Iterator[str]:
    """Run the emulator with ``buckets`` made; yields its endpoint URL (for ``STORAGE_EMULATOR_HOST``).

    The emulator's own request handler and in-memory storage, served here rather than by its ``Server``: that
    one polls for shutdown every 0.5 s and never joins its thread; this one stops in a few ms, thread joined."""
    import threading
    from functools import partial
    from http.server import HTTPServer

    from gcp_storage_emulator.handlers.buckets import create_bucket
    from gcp_storage_emulator.server import RequestHandler
    from gcp_storage_emulator.storage import Storage

    logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)  # a line per request otherwise
    storage = Storage(use_memory_fs=True)
    for bucket in buckets:
        create_bucket(bucket, storage)
    server = HTTPServer(("127.0.0.1", port or free_port()), partial(RequestHandler, storage))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def gcs_client(endpoint: str) -> Any:
    """An anonymous client of the emulator at ``endpoint`` (as ``STORAGE_EMULATOR_HOST`` gives)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": endpoint})


def object_bytes(endpoint: str, key: str, bucket: str = "items") -> bytes:
    """The bytes of object ``key``."""
    return bytes(gcs_client(endpoint).bucket(bucket).blob(key).download_as_bytes())


def object_names(endpoint: str, bucket: str = "items") -> list[str]:
    """The names of every object in ``bucket``, sorted."""
    return sorted(blob.name for blob in gcs_client(endpoint).list_blobs(bucket))


@contextmanager
def refusing_token_server() -> Iterator[str]:
    """An OAuth 2.0 token endpoint that refuses every grant as Google's does a revoked key
    (``400 invalid_grant``); yields its URL (a service-account file's ``token_uri``)."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Refuse(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = b'{"error": "invalid_grant", "error_description": "Invalid JWT Signature."}'
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = HTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def service_account_file(path: str, token_uri: str) -> None:
    """Write a service-account key file (a fresh RSA key) whose token endpoint is ``token_uri``."""
    import json

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    info = {"type": "service_account", "project_id": "eclaw-test", "private_key_id": "1", "private_key": key.decode(),
            "client_email": "eclaw@eclaw-test.iam.gserviceaccount.com", "client_id": "1",
            "token_uri": token_uri}  # fmt: skip
    with open(path, "w", encoding="utf-8") as file:
        json.dump(info, file)
