"""One local site per test module of eclaw.text: the Python docs and our extra pages."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from eclaw.testing import serve
from tests.text.site import docs_folder, make_app


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def base() -> AsyncIterator[str]:
    async with serve(make_app(docs_folder())) as url:
        yield url
