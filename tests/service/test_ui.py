"""The web UI in a real headless Chromium: start a job from the form, watch its item count move (SSE),
cancel it, see it stopped; a POST without the CSRF token is refused. With ``SERVICE_SHOTS=1``
(``make service-shots``) it also saves screenshots of the main pages into docs/."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.conftest import headless_chromium
from tests.service.forked_service import ForkedService
from tests.service.helpers import FLOW, Service, site, write_project

pytestmark = pytest.mark.usefixtures("chromium")
in_module_loop = pytest.mark.asyncio(loop_scope="module")
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with site(delay=0.1) as url:
        yield url


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = ForkedService(write_project(tmp_path_factory.mktemp("project"))).start()
    yield service
    service.drain()
    service.stop()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def browser() -> AsyncIterator[object]:
    async with headless_chromium() as chromium:
        yield chromium


def _shot(name: str) -> str | None:
    return str(DOCS / name) if os.environ.get("SERVICE_SHOTS") else None


@in_module_loop
async def test_start_watch_cancel_in_chromium(service: Service, base: str, browser: object) -> None:
    size = {"width": 1200, "height": 800}
    page = await browser.new_page(bypass_csp=True, viewport=size)  # type: ignore[attr-defined]
    await page.goto(service.url + "/")
    await page.select_option("select[name=spider]", "spiders.py:Slow")
    await page.fill("textarea[name=args]", f"start_urls={base}/?count=400\npin=1234-secret")
    await page.click("button:text-is('Start')")
    await page.wait_for_url("**/jobs/*")
    job_id = int(page.url.rsplit("/", 1)[1])
    await page.goto(service.url + "/")
    row = f"[data-job='{job_id}']"
    await page.wait_for_function(f"Number(document.querySelector(\"{row} .items\").textContent) >= 3", timeout=30_000)
    first = int(await page.text_content(f"{row} .items"))
    await page.wait_for_function(
        f"Number(document.querySelector(\"{row} .items\").textContent) > {first}", timeout=30_000
    )
    if _shot("service-jobs.png"):
        await page.screenshot(path=_shot("service-jobs.png"))
    await page.click(f"{row} .cancel button")
    await page.wait_for_function(
        f"document.querySelector(\"{row} .state\").textContent === 'cancelled'", timeout=30_000
    )
    await page.goto(f"{service.url}/jobs/{job_id}")
    text = await page.text_content("main")
    assert "cancelled" in text and "pin = ***" in text and "1234-secret" not in text
    if _shot("service-job.png"):
        await page.screenshot(path=_shot("service-job.png"), full_page=True)
    await page.close()


@in_module_loop
async def test_schedule_editor_in_chromium(service: Service, browser: object) -> None:
    size = {"width": 1200, "height": 700}
    page = await browser.new_page(bypass_csp=True, viewport=size)  # type: ignore[attr-defined]
    await page.goto(service.url + "/schedules")
    await page.fill("input[name=cron]", "0 25 * * *")
    await page.click("button:text-is('Add')")
    assert "bad cron expression '0 25 * * *'" in await page.text_content(".error")
    await page.fill("input[name=cron]", "30 6 * * 1-5")
    await page.fill("input[name=timezone]", "Europe/Paris")
    await page.click("button:text-is('Add')")
    await page.wait_for_selector("text=Europe/Paris")
    if _shot("service-schedules.png"):
        await page.screenshot(path=_shot("service-schedules.png"))
    await page.click("button:text-is('Remove')")
    await page.wait_for_function("!document.body.textContent.includes('Europe/Paris')")
    await page.close()


@in_module_loop
async def test_flow_dag_goes_green_in_chromium(service: Service, base: str, browser: object) -> None:
    (service.project / "pages_flow.py").write_text(FLOW)
    job_id = service.call("POST", "/api/jobs", {"flow": "pages_flow.py", "args": {"base": base}})[1]["id"]
    page = await browser.new_page(bypass_csp=True, viewport={"width": 1200, "height": 700})  # type: ignore[attr-defined]
    await page.goto(f"{service.url}/jobs/{job_id}")
    dag = f"[data-dag='{job_id}']"
    assert await page.text_content(f"{dag} [data-task='count'] small:last-child") == "after pages"
    for task in ("pages", "count"):  # live: the page is not reloaded
        await page.wait_for_selector(f"{dag} [data-task='{task}'].task-succeeded", timeout=60_000)
    assert await page.text_content(f"{dag} [data-task='count'] .task-state") == "succeeded"
    if _shot("service-flow.png"):
        await page.screenshot(path=_shot("service-flow.png"))
    await page.close()
    (service.project / "pages_flow.py").unlink()


def test_post_without_csrf_is_refused(service: Service) -> None:
    data = b"spider=spiders.py%3ASlow&args="
    request = urllib.request.Request(service.url + "/ui/jobs", data=data, method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    caught.value.close()
    assert caught.value.code == 403
    assert not service.call("GET", "/api/jobs?state=queued")[1]["jobs"]
