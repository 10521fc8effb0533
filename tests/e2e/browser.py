"""A real headless browser (Debian's chromium, driven by selenium through chromedriver)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
# `make docs-screenshots` sets it: the views the tests look at become the guides' pictures (committed)
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
DOCS_SCREENSHOTS_ENV = "TONY_DOCS_SCREENSHOTS"


def screenshot(browser, name: str) -> Path:
    """What the browser shows, into artifacts/NAME.png, and into docs/images/ when the docs' pictures are
    being refreshed."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    browser.save_screenshot(str(path))
    if os.environ.get(DOCS_SCREENSHOTS_ENV):
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        (DOCS_IMAGES / path.name).write_bytes(path.read_bytes())
    return path


def chromium(profile: Path):
    """A headless Chromium session whose profile lives in ``profile`` (a test's ``tmp_path``, so that
    pytest, not /tmp, keeps it); the test is skipped where chromium is not installed."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and driver):
        pytest.skip("chromium and chromedriver are not installed (make test installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000", f"--user-data-dir={profile / 'chromium'}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver), options=options)


DEEP_TEXT = """
const seen = [];
function walk(node) {
  if (node.shadowRoot) walk(node.shadowRoot);
  for (const child of node.childNodes) {
    if (child.nodeType === 3) seen.push(child.textContent);
    else walk(child);
  }
}
walk(document);
return seen.join(' ');
"""
