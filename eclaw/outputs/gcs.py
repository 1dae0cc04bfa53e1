"""``gs://bucket/key``: items to Google Cloud Storage (or a GCS emulator), exactly once.

The client is Google's (``google-cloud-storage``), its credentials found as every Google client finds
them (Application Default Credentials): ``GOOGLE_APPLICATION_CREDENTIALS`` (a service-account or user
key file), ``gcloud auth application-default login``, the metadata server of a Google Cloud machine.
``STORAGE_EMULATOR_HOST`` points it at an emulator, with anonymous credentials; the spec's
``?endpoint=`` option overrides the endpoint for one output.

Bytes go at once into a local spool file (:func:`~eclaw.outputs.spool.spool_path`: in the
crawl's state directory), as for S3. At each
checkpoint the bytes not yet sent become one **part** when there are at least :data:`PART_SIZE` of them:
a hidden object ``KEY.eclaw-parts/NNNNN`` (the rest waits in the spool). The parts sent and the spool's
size are the saved state. :meth:`GCSSink.finish` sends the last part, composes the parts into the
object (GCS's ``compose``, 32 sources a call, in stages beyond) and deletes them; an output that never
reached a part is uploaded whole. Until then no object is at the key. A killed run resumes with its
saved parts (listed: if one is gone, the object is redone from the spool, which keeps every byte until
the object is complete), the spool cut back to the checkpoint and parts numbered on from the saved
ones, so a part the killed run sent after its checkpoint is overwritten or left out of the object.
A commit that cannot reach the store logs one line naming the output and the reason; the bytes stay in
the spool (fsynced, in the saved state) and the next commit or the resumed run sends them.
:meth:`GCSSink.finish` raises when the store is still unreachable at the end: the spool stays.

No resumable-upload session is used for parts: a session URI is a bearer capability to write the
object and would have to be saved in the crawl's state.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eclaw.exceptions import ConfigError
from eclaw.outputs.api import Destination, OutputSpec, Sink
from eclaw.outputs.spool import PART_SIZE, PartedSpool, staging_file
from eclaw.security.redact import redact_url

__all__ = ["GCS", "PART_SIZE", "GCSDestination", "GCSSink"]

logger = logging.getLogger(__name__)

"""The least bytes a checkpoint sends as one part (fewer wait in the spool for the next one)."""
COMPOSE_SOURCES = 32
"""GCS's most source objects of one ``compose`` call."""
PARTS = ".eclaw-parts/"
"""The parts of ``KEY`` are the objects ``KEY.eclaw-parts/NNNNN`` until the object is composed."""
TIMEOUT = (5.0, 60.0)
"""Connect and read timeouts of one request, in seconds."""
CHECK_RETRY = 2.0
"""How long, in seconds, the check before the crawl retries a transient error."""
_CONTENT_TYPE = "application/octet-stream"


def _client(options: Mapping[str, str]) -> Any:
    """A storage client: anonymous against ``STORAGE_EMULATOR_HOST``, else Application Default Credentials."""
    try:
        import google.auth
        from google.cloud import storage
    except ImportError as error:  # pragma: no cover - the extra is missing
        raise ConfigError("gs:// outputs need google-cloud-storage: pip install 'eclaw[gcs]'") from error
    for name in ("google.auth", "google.cloud", "google.resumable_media"):  # their lines are noise (a GCE probe...)
        logging.getLogger(name).setLevel(logging.ERROR)
    endpoint = options.get("endpoint") or None
    client_options = {"api_endpoint": endpoint} if endpoint else None
    if os.environ.get("STORAGE_EMULATOR_HOST"):  # the client itself then takes anonymous credentials
        return storage.Client(client_options=client_options)
    scopes = ["https://www.googleapis.com/auth/devstorage.read_write"]
    credentials, project = google.auth.default(scopes=scopes)  # raises DefaultCredentialsError, said by _reason
    return storage.Client(project=project or "<none>", credentials=credentials, client_options=client_options)


def _split(location: str) -> tuple[str, str]:
    url = urlsplit(location)
    key = url.path.lstrip("/")
    if not url.netloc or not key:
        raise ConfigError(f"output {redact_url(location)}: a GCS location is gs://BUCKET/KEY")
    return url.netloc, key


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return redact_url(line[:300])


def _reason(error: BaseException) -> str:
    """One line for an error of the client, never a secret: the service's status and message, or the cause."""
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    if isinstance(error, api.RetryError) and error.cause is not None:
        return _reason(error.cause)
    if isinstance(error, api.Unauthorized | api.Forbidden):
        return f"access denied (wrong credentials?): {error.code} {_first_line(error.message)}".strip()
    if isinstance(error, api.GoogleAPICallError):
        return f"{error.code} {_first_line(error.message)}".strip()
    if isinstance(error, auth.DefaultCredentialsError):
        return _first_line(str(error)).split(". ")[0]
    if isinstance(error, auth.RefreshError):
        said = error.args[0] if error.args and isinstance(error.args[0], str) else str(error)
        return f"the credentials were refused: {_first_line(said)}"
    text = str(error)
    host = re.search(r"host='([^']+)', port=(\d+)", text)
    if host:  # urllib3's connection errors (a long repr): where, and the system's word for it
        cause = re.findall(r"\[Errno -?\d+\] ([^'\")]+)", text)
        return f"cannot reach {host[1]}:{host[2]}: {cause[-1] if cause else type(error).__name__}"
    return _first_line(text) or type(error).__name__


class GCSSink(PartedSpool):
    """One GCS object: a local spool, parts sent at checkpoints, composed into the object at the end."""

    exactly_once = True

    def __init__(self, bucket: Any, location: str, spool: Path, *, truncate: bool, retry: Any) -> None:
        super().__init__(location, spool, truncate=truncate)
        self.bucket, self.retry = bucket, retry
        _, self.key = _split(location)
        self._parts: list[dict[str, Any]] = []

    def _state(self) -> dict[str, Any]:
        return {"spool": str(self.spool), "size": self._size, "sent": self._sent, "parts": list(self._parts)}

    async def _call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return await asyncio.to_thread(function, *args, retry=self.retry, timeout=TIMEOUT, **kwargs)
        except Exception as error:  # the client's errors: the store unreachable, refused...
            raise OSError(f"output {self.shown}: {_reason(error)}") from error

    async def _send_part(self, end: int) -> None:
        name = f"{self.key}{PARTS}{len(self._parts) + 1:05d}"
        body = self._read(self._sent, end)
        await self._call(self.bucket.blob(name).upload_from_string, body, content_type=_CONTENT_TYPE)
        self._parts.append({"name": name, "end": end})
        self._sent = end

    async def resume(self, saved: dict[str, Any]) -> None:
        self._cut_back(int(saved["size"]))
        self._sent, self._parts = int(saved["sent"]), [dict(p) for p in saved.get("parts", [])]
        if not self._parts:
            return
        try:
            found = await self._call(self._listing)
        except OSError as error:
            logger.warning("%s; the parts are checked again at the end", error)
            return
        start = 0
        for part in self._parts:
            if found.get(part["name"]) != part["end"] - start:  # gone (a lifecycle rule): redo from the spool
                self._parts, self._sent = [], 0
                return
            start = part["end"]

    def _listing(self, **request: Any) -> dict[str, int]:
        """The sizes of the objects under this key's parts prefix, by name."""
        blobs = self.bucket.client.list_blobs(self.bucket, prefix=self.key + PARTS, **request)
        return {blob.name: int(blob.size or 0) for blob in blobs}

    def _compose(self, **request: Any) -> None:
        """Compose the parts into the object (in stages of 32 sources), then delete everything under the prefix."""
        sources = [self.bucket.blob(part["name"]) for part in self._parts]
        stage = 0
        while len(sources) > COMPOSE_SOURCES:
            stage += 1
            staged = self.bucket.blob(f"{self.key}{PARTS}composed-{stage:05d}")
            staged.content_type = _CONTENT_TYPE
            staged.compose(sources[:COMPOSE_SOURCES], **request)
            sources = [staged, *sources[COMPOSE_SOURCES:]]
        target = self.bucket.blob(self.key)
        target.content_type = _CONTENT_TYPE
        target.compose(sources, **request)

    def _clear_parts(self, **request: Any) -> None:
        for name in self._listing(**request):
            self.bucket.blob(name).delete(**request)

    async def finish(self) -> None:
        assert self._fd is not None, "sink closed"
        if self._parts and self._size > self._sent:
            await self._send_part(self._size)
        if self._parts:
            await self._call(self._compose)
        else:
            target = self.bucket.blob(self.key)
            await self._call(target.upload_from_filename, str(self.spool), content_type=_CONTENT_TYPE)
        try:
            await self._call(self._clear_parts)
        except OSError as error:  # the object is complete: leftover parts are only clutter
            logger.warning("%s; delete the objects %s%s* by hand", error, self.key, PARTS)
        os.close(self._fd)
        self._fd = None
        self.spool.unlink(missing_ok=True)


class GCSDestination:
    """The objects of one ``gs://`` spec.

    Args:
        spec: the parsed spec (``?endpoint=`` is read from its options).
        retry_timeout: how long, in seconds, a request is retried (with backoff) on a transient error
            before a commit gives up until the next checkpoint.
    """

    def __init__(self, spec: OutputSpec, *, retry_timeout: float = 15.0) -> None:
        self.options = {k: v for k, v in spec.options.items() if k == "endpoint"}
        self.retry_timeout = retry_timeout
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = _client(self.options)
        return self._client

    def _retry(self, timeout: float) -> Any:
        from google.cloud.storage.retry import DEFAULT_RETRY

        return DEFAULT_RETRY.with_timeout(timeout)

    def _sink(self, location: str, spool: Path, *, truncate: bool) -> Sink:
        bucket = self.client.bucket(_split(location)[0])
        retry = self._retry(self.retry_timeout)
        return GCSSink(bucket, location, spool, truncate=truncate, retry=retry)

    def check(self, location: str) -> None:
        bucket, _ = _split(location)
        try:
            self.client.bucket(bucket).reload(retry=self._retry(min(self.retry_timeout, CHECK_RETRY)), timeout=TIMEOUT)
        except ConfigError:
            raise
        except Exception as error:
            from google.api_core.exceptions import NotFound

            said = "the bucket does not exist" if isinstance(error, NotFound) else _reason(error)
            raise ConfigError(f"output {redact_url(location)}: {said}") from None

    def open(self, location: str, spool: Path) -> Sink:
        return self._sink(location, spool, truncate=True)

    def reopen(self, location: str, spool: Path) -> Sink:
        return self._sink(location, spool, truncate=False)

    def remove(self, location: str) -> bool:
        bucket_name, key = _split(location)
        bucket = self.client.bucket(bucket_name)
        request = {"retry": self._retry(self.retry_timeout), "timeout": TIMEOUT}
        names = [blob.name for blob in self.client.list_blobs(bucket, prefix=key + PARTS, **request)]
        if bucket.blob(key).exists(**request):
            names.append(key)
        for name in names:
            bucket.blob(name).delete(**request)
        return bool(names)

    def staging_path(self, location: str) -> Path:
        return staging_file(location)

    async def upload(self, staged: Path, location: str) -> None:
        bucket, key = _split(location)
        blob = self.client.bucket(bucket).blob(key)
        try:
            await asyncio.to_thread(blob.upload_from_filename, str(staged), content_type=_CONTENT_TYPE,
                                    retry=self._retry(self.retry_timeout), timeout=TIMEOUT)  # fmt: skip
        except Exception as error:
            raise OSError(f"output {redact_url(location)}: {_reason(error)}") from error


class _Factory:
    def make(self, spec: OutputSpec) -> Destination:
        return GCSDestination(spec)


GCS = _Factory()
