"""Headless Chromium from Debian, driven by Selenium through Debian's chromedriver (never a driver fetched at
run time): the web pages' tests open what a person would, click and type as they would, and keep a
screenshot of each page under build/test-artifacts/web/."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from common import REPO_ROOT, fail

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = REPO_ROOT / "build" / "test-artifacts" / "web"


def start_browser():
    """A headless Chromium (--no-sandbox: CI runs as root), its window the size of a laptop's."""
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        fail("chromium and chromium-driver are missing: run scripts/bootstrap.sh")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--no-proxy-server", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def screenshot(driver, name: str) -> Path:
    """The page as it looks now, kept as build/test-artifacts/web/NAME.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / (re.sub(r"[^a-z0-9_-]+", "-", name.lower()) + ".png")
    driver.save_screenshot(str(path))
    return path


def alert_text(driver) -> str | None:
    """The text of an open alert (a script ran), or None."""
    from selenium.common.exceptions import NoAlertPresentException

    try:
        return driver.switch_to.alert.text
    except NoAlertPresentException:
        return None


def csp_violations(driver) -> list[str]:
    """What the browser's console said about the Content-Security-Policy since the last call."""
    return [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e.get("message", "")]
