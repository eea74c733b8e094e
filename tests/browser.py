"""Headless Chromium (Debian's ``chromium`` + ``chromium-driver``) through Selenium,
for the topology page tests. ``chrome()`` skips the test, saying why, when the
browser, its driver or selenium is missing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from isthmus.polling import poll

CHROMIUM = os.environ.get("ISTHMUS_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("ISTHMUS_CHROMEDRIVER", "/usr/bin/chromedriver")


def missing() -> str | None:
    """Why no browser test can run here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(path) or shutil.which(path)):
            return f"{path} not installed (apt-get install chromium chromium-driver; tools/setup.sh does as root)"
    try:
        import selenium  # noqa: F401 - only whether it is installed
    except ImportError:
        return "selenium not installed (pip install -c constraints.txt '.[test]')"
    return None


@contextmanager
def chrome(width: int = 1600, height: int = 1000) -> Iterator[Any]:
    reason = missing()
    if reason:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox",  # root in CI containers has no user namespaces
                "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    try:  # an exception is "not yet": e.g. an element replaced by a refresh meanwhile
        return poll(predicate, timeout, what, interval, retry_on=(Exception,))
    except TimeoutError as err:
        raise AssertionError(str(err)) from None


def artifact_dir(fallback: Path) -> Path:
    """``ISTHMUS_TEST_ARTIFACTS`` (CI keeps it), else the test's own tmp dir."""
    named = os.environ.get("ISTHMUS_TEST_ARTIFACTS")
    path = Path(named) if named else fallback
    path.mkdir(parents=True, exist_ok=True)
    return path
