"""A real S3 server for the tests: moto's standalone server on a free 127.0.0.1 port, in a thread."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing-key", "AWS_SECRET_ACCESS_KEY": "testing-secret", "AWS_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def moto_server(port: int = 0) -> Iterator[str]:
    """Run moto's S3 server; yields its endpoint URL (stopped at exit)."""
    from moto.server import ThreadedMotoServer

    port = port or free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def s3_client(endpoint: str) -> object:
    import boto3

    return boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )  # fmt: skip


@contextmanager
def ftp_server(root: str, port: int = 0) -> Iterator[str]:
    """Run pyftpdlib on 127.0.0.1 serving ``root`` (user ``eclaw``, password ``s3cret``); yields ``host:port``."""
    import threading
    import warnings

    with warnings.catch_warnings():  # pyftpdlib still imports asyncore (deprecated) on Python 3.11
        warnings.simplefilter("ignore", DeprecationWarning)
        from pyftpdlib.authorizers import DummyAuthorizer
        from pyftpdlib.handlers import FTPHandler
        from pyftpdlib.servers import FTPServer

    authorizer = DummyAuthorizer()
    authorizer.add_user("eclaw", "s3cret", root, perm="elradfmw")
    handler = type("Handler", (FTPHandler,), {"authorizer": authorizer, "passive_ports": None})
    server = FTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"timeout": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.address[1]}"
    finally:
        server.close_all()
        thread.join(10)


@contextmanager
def ftps_server(root: str, certfile: str, keyfile: str) -> Iterator[tuple[str, list[str]]]:
    """pyftpdlib with TLS required on control and data (``AUTH TLS``, ``PROT P``), as :func:`ftp_server`;
    yields ``host:port`` and the list of files the server received over a TLS data connection."""
    import threading
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from pyftpdlib.authorizers import DummyAuthorizer
        from pyftpdlib.handlers import TLS_FTPHandler
        from pyftpdlib.ioloop import IOLoop
        from pyftpdlib.servers import FTPServer

    received: list[str] = []
    authorizer = DummyAuthorizer()
    authorizer.add_user("eclaw", "s3cret", root, perm="elradfmw")

    def on_file_received(self: TLS_FTPHandler, file: str) -> None:
        if self._prot:  # PROT P was in force: the file came over a TLS data connection
            received.append(file)

    handler = type("Handler", (TLS_FTPHandler,), {
        "authorizer": authorizer, "passive_ports": None, "certfile": certfile, "keyfile": keyfile,
        "tls_control_required": True, "tls_data_required": True, "on_file_received": on_file_received,
    })  # fmt: skip
    server = FTPServer(("127.0.0.1", 0), handler, ioloop=IOLoop())  # its own loop: not ftp_server's shared one
    thread = threading.Thread(target=server.serve_forever, kwargs={"timeout": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.address[1]}", received
    finally:
        server.close_all()
        thread.join(10)
