"""``s3://bucket/key``: items to Amazon S3 or any S3-compatible store (MinIO, Ceph, moto...), exactly once.

The client is boto3's (the AWS SDK): the standard variables and files are honoured as the AWS CLI
does (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` /
``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ``~/.aws/config``); the spec's
``?region=`` and ``?endpoint=`` options override the region and the endpoint.

Bytes go at once into a local spool file (:func:`~eclaw.outputs.spool.spool_path`: in the
crawl's state directory). At each checkpoint
the bytes not yet sent become one part of a multipart upload when there are at least 5 MiB of them
(S3's least part but the last); the rest waits in the spool. The upload id, the parts sent and the
spool's size are the saved state. :meth:`S3Sink.finish` sends the last part and completes the
object (or puts it whole when it never reached 5 MiB). A killed run resumes the saved upload: its
parts are listed, the spool cut back to the checkpoint, and parts are numbered on from the saved
ones (a part a killed run sent after its checkpoint is overwritten or left out of the object); a
vanished upload is aborted and redone from the spool, which keeps every byte until the object is
complete. A commit that cannot reach the store logs one line naming the output and the reason; the
bytes stay in the spool (fsynced, in the saved state) and the next commit or the resumed run sends
them. :meth:`S3Sink.finish` raises when the store is still unreachable at the end: the spool stays.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eclaw.exceptions import ConfigError
from eclaw.outputs.api import Destination, OutputSpec, Sink
from eclaw.outputs.spool import PART_SIZE, PartedSpool, staging_file
from eclaw.security.redact import redact_url

__all__ = ["PART_SIZE", "S3", "S3Destination", "S3Sink"]

logger = logging.getLogger(__name__)

"""S3's least size of a part (all but the last)."""


def _client(options: dict[str, str]) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError as error:  # pragma: no cover - the extra is missing
        raise ConfigError("s3:// outputs need boto3: pip install 'eclaw[s3]'") from error
    for name in ("botocore", "boto3", "s3transfer"):  # their INFO lines ("Found credentials in...") are noise
        logging.getLogger(name).setLevel(logging.WARNING)
    config = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2, "mode": "standard"})
    session = boto3.session.Session(region_name=options.get("region") or None)
    return session.client("s3", endpoint_url=options.get("endpoint") or None, config=config)


def _split(location: str) -> tuple[str, str]:
    url = urlsplit(location)
    key = url.path.lstrip("/")
    if not url.netloc or not key:
        raise ConfigError(f"output {redact_url(location)}: an S3 location is s3://BUCKET/KEY")
    return url.netloc, key


def _reason(error: BaseException) -> str:
    """One line for a botocore error, never a secret: the service's code and message, or the error's."""
    response = getattr(error, "response", None)
    if response is None and error.__context__ is not None:  # boto3's upload_file wraps the service's error
        response = getattr(error.__context__, "response", None)
    if isinstance(response, dict):
        err = response.get("Error", {})
        code, message = err.get("Code", ""), err.get("Message", "")
        if code in ("403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"):
            return f"access denied (wrong credentials?): {code} {message}".strip()
        if code in ("404", "NoSuchBucket"):
            return "the bucket does not exist"
        return f"{code} {message}".strip()
    return redact_url(str(error).splitlines()[0] if str(error) else type(error).__name__)


class S3Sink(PartedSpool):
    """One S3 object: a local spool, parts sent at checkpoints, the object completed at the end."""

    exactly_once = True

    def __init__(self, client: Any, location: str, spool: Path, *, truncate: bool) -> None:
        super().__init__(location, spool, truncate=truncate)
        self.client = client
        self.bucket, self.key = _split(location)
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []

    def _state(self) -> dict[str, Any]:
        return {"spool": str(self.spool), "size": self._size, "sent": self._sent,
                "upload_id": self._upload_id, "parts": list(self._parts)}  # fmt: skip

    async def _call(self, method: str, **kwargs: Any) -> Any:
        try:
            return await asyncio.to_thread(getattr(self.client, method), **kwargs)
        except Exception as error:  # botocore's errors: the store unreachable, refused...
            raise OSError(f"output {self.shown}: {_reason(error)}") from error

    async def _send_part(self, end: int) -> None:
        if self._upload_id is None:
            made = await self._call("create_multipart_upload", Bucket=self.bucket, Key=self.key)
            self._upload_id = str(made["UploadId"])
        number = len(self._parts) + 1
        body = self._read(self._sent, end)
        sent = await self._call("upload_part", Bucket=self.bucket, Key=self.key, UploadId=self._upload_id,
                                PartNumber=number, Body=body)  # fmt: skip
        self._parts.append({"PartNumber": number, "ETag": sent["ETag"], "end": end})
        self._sent = end

    async def resume(self, saved: dict[str, Any]) -> None:
        self._cut_back(int(saved["size"]))
        self._sent = int(saved["sent"])
        self._upload_id, self._parts = saved.get("upload_id"), [dict(p) for p in saved.get("parts", [])]
        if self._upload_id is None:
            return
        try:
            await asyncio.to_thread(self.client.list_parts, Bucket=self.bucket, Key=self.key, UploadId=self._upload_id)
        except Exception:  # the upload is gone (aborted, expired): redo it from the spool
            self._upload_id, self._parts, self._sent = None, [], 0

    async def finish(self) -> None:
        assert self._fd is not None, "sink closed"
        if self._upload_id is None:
            await self._call("put_object", Bucket=self.bucket, Key=self.key, Body=self._read(0, self._size))
        else:
            if self._size > self._sent or not self._parts:
                await self._send_part(self._size)
            parts = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in self._parts]
            await self._call("complete_multipart_upload", Bucket=self.bucket, Key=self.key,
                             UploadId=self._upload_id, MultipartUpload={"Parts": parts})  # fmt: skip
        os.close(self._fd)
        self._fd = None
        self.spool.unlink(missing_ok=True)


class S3Destination:
    """The objects of one ``s3://`` spec."""

    def __init__(self, spec: OutputSpec) -> None:
        self.options = {k: v for k, v in spec.options.items() if k in ("region", "endpoint")}
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = _client(self.options)
        return self._client

    def check(self, location: str) -> None:
        bucket, _ = _split(location)
        try:
            self.client.head_bucket(Bucket=bucket)
        except ConfigError:
            raise
        except Exception as error:
            raise ConfigError(f"output {redact_url(location)}: {_reason(error)}") from None

    def open(self, location: str, spool: Path) -> Sink:
        return S3Sink(self.client, location, spool, truncate=True)

    def reopen(self, location: str, spool: Path) -> Sink:
        return S3Sink(self.client, location, spool, truncate=False)

    def remove(self, location: str) -> bool:
        bucket, key = _split(location)
        try:
            self.client.head_object(Bucket=bucket, Key=key)
        except Exception:
            return False
        self.client.delete_object(Bucket=bucket, Key=key)
        return True

    def staging_path(self, location: str) -> Path:
        return staging_file(location)

    async def upload(self, staged: Path, location: str) -> None:
        bucket, key = _split(location)
        try:
            from boto3.s3.transfer import TransferConfig  # boto3 is imported only with an s3:// output

            flat = TransferConfig(max_concurrency=2)  # 2 parts of 8 MB in memory at most, not 10: RSS stays flat
            await asyncio.to_thread(self.client.upload_file, str(staged), bucket, key, Config=flat)
        except Exception as error:
            raise OSError(f"output {redact_url(location)}: {_reason(error)}") from error


class _Factory:
    def make(self, spec: OutputSpec) -> Destination:
        return S3Destination(spec)


S3 = _Factory()
