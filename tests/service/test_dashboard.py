"""The dashboard in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
installed by ``make browser-deps``): log in, see the cluster's devices, start a job from its
example and see it on its page, see a job succeed with its accuracy curve drawn; screenshots
of the three views go to ``$EDGEWISE_SCREENSHOTS`` (docs/img for the docs) or a temporary
folder."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from managerproc import ManagerProcess, skip_unless_ci

pytestmark = [pytest.mark.ray, pytest.mark.system]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def _browser_or_skip() -> None:
    """Skip, saying why, where no browser can be had; never in CI (make test installs it)."""
    reason = None
    try:
        import selenium  # noqa: F401
    except ImportError:
        reason = "selenium is not installed (pip install -e '.[dev]')"
    if CHROMIUM is None or DRIVER is None:
        reason = "chromium and chromium-driver are not installed (make browser-deps)"
    if reason is not None:
        skip_unless_ci(reason)


@pytest.fixture
def browser() -> Iterator[Any]:
    _browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1360,1000", "--no-first-run", "--disable-extensions"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(DRIVER)))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("EDGEWISE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _drawn(browser: Any, selector: str) -> int:
    """How many pixels of the canvas under ``selector`` are not transparent."""
    script = """
        const canvas = document.querySelector(arguments[0] + ' canvas');
        if (!canvas) return 0;
        const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        let n = 0; for (let i = 3; i < data.length; i += 4) if (data[i] > 0) n++;
        return n;"""
    found: int = browser.execute_script(script, selector)
    return found


@pytest.mark.timeout(600)
def test_log_in_see_the_cluster_run_a_job_and_see_its_curve(
        manager: ManagerProcess, browser: Any, tmp_path: Path) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    # the dashboard redraws its tables at every poll: an element found may be replaced
    # before it is read, which is no failure (found again at the next try)
    stale = (StaleElementReferenceException,)
    wait = WebDriverWait(browser, 120, poll_frequency=0.5, ignored_exceptions=stale)
    shots = _shots(tmp_path)
    devices = [d["name"] for d in manager.get("/api/v1/cluster")["devices"]]

    browser.get(manager.url + "/")
    wait.until(seen.visibility_of_element_located((By.ID, "login-form")))
    browser.find_element(By.ID, "token").send_keys(manager.token)
    browser.find_element(By.ID, "login-button").click()
    for device in devices:
        wait.until(seen.presence_of_element_located((By.ID, f"device-{device}")))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#map g.device")) == len(devices)
    wait.until(lambda b: b.find_element(By.CSS_SELECTOR, f"#device-{devices[0]} td:nth-child(4)")
               .text not in ("", "—"))  # live CPU figures arrived from the device agents
    browser.save_screenshot(str(shots / "dashboard-cluster.png"))

    # The button starts the kind's example (with the cluster's four SIFT apps, which take
    # more than a core of the host: test_job_kinds.py runs an update with them to the end);
    # its page follows it, and it is stopped once it runs.
    browser.find_element(By.ID, "nav-jobs").click()
    wait.until(seen.element_to_be_clickable((By.ID, "start-update"))).click()
    wait.until(lambda b: "#/jobs/job-" in b.current_url)
    example_id = browser.current_url.rsplit("/", 1)[-1]
    assert manager.get(f"/api/v1/jobs/{example_id}")["kind"] == "update"
    manager.post(f"/api/v1/jobs/{example_id}/stop")
    wait.until(lambda b: b.find_element(By.ID, "job-state").text == "stopped")

    # a job trained alone, followed from its page to the end, its curve drawn
    job_id = manager.post("/api/v1/jobs", {"kind": "update", "spec": {
        "epochs": 2, "learning_rate": 0.003, "background_apps": False}})["id"]
    browser.get(f"{manager.url}/#/jobs/{job_id}")
    WebDriverWait(browser, 300, poll_frequency=1, ignored_exceptions=stale).until(
        lambda b: b.find_element(By.ID, "job-state").text in ("succeeded", "failed"))
    assert browser.find_element(By.ID, "job-state").text == "succeeded"
    wait.until(lambda b: _drawn(b, "#chart-val_accuracy") > 500)
    assert browser.find_elements(By.CSS_SELECTOR, "#job-plan table")  # shards and batches
    assert "checkpoint" in browser.find_element(By.ID, "job-events").text
    browser.save_screenshot(str(shots / "dashboard-job.png"))

    browser.find_element(By.ID, "nav-jobs").click()
    for listed in (job_id, example_id):
        wait.until(seen.presence_of_element_located((By.ID, f"job-{listed}")))
    browser.save_screenshot(str(shots / "dashboard-jobs.png"))
    assert manager.token not in browser.current_url
    assert manager.get(f"/api/v1/jobs/{job_id}")["state"] == "succeeded"
