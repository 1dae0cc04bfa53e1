"""TLS failures named alike by every fetcher, whichever TLS library made the handshake.

A certificate that does not verify is ``tls: certificate verify failed: <why>`` (OpenSSL 3's
wording: ``self-signed certificate``, ``certificate has expired``, ``IP address mismatch``);
a handshake that cannot succeed is ``tls: <what>`` (``tls: wrong version number``).
"""

from __future__ import annotations

from eclaw.exceptions import TLSCertificateError, TLSError

__all__ = ["certificate_error", "handshake_error"]

_HINT = "to crawl it anyway, turn the check off with -s verify_tls=false"


def certificate_error(url: str, detail: str) -> TLSCertificateError:
    """``url``'s certificate does not verify, for the reason ``detail`` (its first line is kept)."""
    detail = detail.splitlines()[0].rstrip(".").replace("self signed", "self-signed")  # BoringSSL's older wording
    reason = "tls: certificate verify failed: " + detail.partition(",")[0]  # no host name: one reason per kind
    return TLSCertificateError(f"TLS certificate of {url} does not verify: {detail} ({_HINT})", reason=reason)


def handshake_error(url: str, what: str) -> TLSError:
    """The TLS handshake with ``url`` failed for a reason a retry would meet again, e.g. ``WRONG_VERSION_NUMBER``."""
    what = what.lower().replace("_", " ")
    return TLSError(f"TLS handshake with {url} failed: {what}", reason=f"tls: {what}")
