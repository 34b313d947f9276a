"""Headless Chromium for the manager's pages (Debian's ``chromium`` and ``chromium-driver``, driven by Selenium).

- ``downloads`` (per test): the directory a download link saves to, without a dialog.
- ``browser`` (per test): a WebDriver on a fresh profile, its console kept (``console_errors``), quit at teardown.

Screenshots (``shot``) go to ``test-artifacts/manager/`` (or ``$TEST_ARTIFACTS_DIR/manager``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.services import REPO

ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS_DIR") or REPO / "test-artifacts") / "manager"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
         "--window-size=1500,1000")


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    return tmp_path / "downloads"


@pytest.fixture
def browser(downloads: Path) -> Iterator[Any]:
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.fail("Debian's chromium and chromium-driver are needed (make test installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="cf-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    downloads.mkdir(parents=True, exist_ok=True)  # a download link saves there, without a dialog
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        driver.set_page_load_timeout(60)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def shot(driver: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def console_errors(driver: Any) -> list[str]:
    """The SEVERE lines of the page's console since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def downloaded(downloads: Path, name: str) -> Path | None:
    """The file once its download is complete (Chromium writes ``<name>.crdownload`` until then)."""
    path = downloads / name
    return path if path.exists() and not (downloads / f"{name}.crdownload").exists() else None


def alert_open(driver: Any) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        driver.switch_to.alert  # noqa: B018 (raises while there is none)
    except NoAlertPresentException:
        return False
    return True
