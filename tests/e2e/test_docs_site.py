"""Issue #53 item 1: the built site's reference pages, opened in the real headless browser, show their
placeholders (`<n>`, `<type>`) as text, where the browser once took them for tags and showed `GPUs: '' or ':'`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.browser import chromium, screenshot

ROOT = Path(__file__).resolve().parents[2]
# page -> words that hold a placeholder, as a reader must see them
PAGES = {
    "reference/cli": ["GPUs: <n> or <type>:<n>", "vcores: <n>, <type>:<n> or <type>[<index>]:<n>",
                      "YARN node label: <label> or <type>:<label>", "print only the <action> to paste"],
    "reference/job-file": ["GPUs: <n> or <type>:<n>", "torchrun's processes per container: <n>, <type>:<n>"],
    "reference/azkaban": ["tony.<type>."],
    "troubleshooting": ["'<type>:<count>,...'"],
}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--quiet",
                            "--site-dir", str(out)], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert build.returncode == 0, build.stderr[-2000:]
    return out


@pytest.mark.parametrize("page", list(PAGES))
def test_reference_pages_show_their_placeholders(site, page, tmp_path):
    from selenium.webdriver.common.by import By

    browser = chromium(tmp_path)
    try:
        browser.get((site / page / "index.html").as_uri())
        text = browser.find_element(By.TAG_NAME, "article").text
        missing = [words for words in PAGES[page] if words not in text]
        assert not missing, missing
        assert "GPUs: '' or ':'" not in text and "On GitHub:" not in text
        if page == "reference/cli":
            row = browser.find_element(By.XPATH, "//td[contains(., 'GPUs: <n>')]")
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", row)
            assert screenshot(browser, "reference-cli-placeholders").stat().st_size > 10_000
    finally:
        browser.quit()
