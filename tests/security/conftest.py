"""Fixtures of the security tests: one origin that speaks TLS and plain HTTP on the same port."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import pytest

from tests.proxies import self_signed
from tests.security.origins import Origin, dual_origin


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
async def origin(tls: ssl.SSLContext) -> AsyncIterator[Origin]:
    async with dual_origin(tls) as running:
        yield running
