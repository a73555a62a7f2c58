"""Real-browser tests of the admin: Debian's Chromium, driven by Selenium, against pytest-django's `live_server`.

Needs the Debian packages chromium and chromium-driver, of the same version (`.ci/run` installs them). Without
them every test marked `browser` is skipped at collection, and pytest's summary (-ra) folds that into one line per
test file, e.g. "SKIPPED [4] tests/browser/test_admin.py: browser tests skipped: /usr/bin/chromedriver not found
(apt-get install chromium chromium-driver)".

Environment:
- CHROMIUM: the browser to start (default /usr/bin/chromium).
- CHROMEDRIVER: the driver to start (default /usr/bin/chromedriver); CHROMEDRIVER=/nonexistent shows the skip.

Nothing is downloaded: the driver is given by path and Selenium Manager is kept offline. Chromium starts headless on
a fresh profile, with its background traffic (updates, sync, QUIC) off, since this machine's network is closed.

`screenshot(name)` saves var/screenshots/<test>-<name>.png (var/ is git-ignored).

The live server runs in another thread with its own database connection, so these tests use `transactional_db`:
they commit their rows, and the database is emptied after each test.
"""

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from django.conf import settings

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
INSTALL_HINT = "apt-get install chromium chromium-driver"
SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # we run as root
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",  # containers often have a small /dev/shm
    "--window-size=1280,900",
]


def _version(binary: str) -> str:
    """The dotted version a Chromium binary prints, e.g. "156.0.8078.114" ("" when it prints none)."""
    try:
        result = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    found = re.search(r"\d+(?:\.\d+){3}", result.stdout)
    return found.group(0) if found else ""


def _why_no_browser() -> str | None:
    """Why the browser tests cannot run here, in one line; None when they can."""
    for binary in (CHROMIUM, CHROMEDRIVER):
        if not os.access(binary, os.X_OK):
            return f"browser tests skipped: {binary} not found ({INSTALL_HINT})"
    browser, driver = _version(CHROMIUM), _version(CHROMEDRIVER)
    if not browser or browser != driver:
        return (
            f"browser tests skipped: {CHROMIUM} is {browser or 'of unknown version'} but {CHROMEDRIVER} is "
            f"{driver or 'of unknown version'} ({INSTALL_HINT} installs matching ones)"
        )
    return None


def pytest_collection_modifyitems(config, items):
    browser_items = [item for item in items if item.get_closest_marker("browser")]
    if not browser_items:
        return
    reason = _why_no_browser()
    if reason:
        for item in browser_items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="package")
def browser():
    """One headless Chromium for all the tests under tests/browser; it quits after the last of them, so it does not
    idle through the rest of the suite."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never reach for the network
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.implicitly_wait(2)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser, live_server):
    """The session's browser, its cookies cleared (each test logs in anew); `live_server.url` is where to go."""
    browser.get(live_server.url + "/admin/login/")  # cookies are per site: be on it to clear them
    browser.delete_all_cookies()
    return browser


@pytest.fixture
def screenshot(browser, request):
    """`screenshot(name)` saves the page as var/screenshots/<test>-<name>.png and returns the path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    test = re.sub(r"\W+", "-", request.node.name).strip("-")

    def save(name: str) -> Path:
        path = SCREENSHOTS / f"{test}-{name}.png"
        assert browser.save_screenshot(str(path)), f"no screenshot saved at {path}"
        return path

    return save


@pytest.fixture
def admin_login(page, live_server, screenshot):
    """`admin_login(username, password)` logs in through the admin's login form (the real HTML form, CSRF token
    included) and waits for the admin index; it saves a screenshot of the filled form."""
    from selenium.webdriver.common.by import By

    from tests.browser.pages import click_and_wait

    def login(username: str, password: str) -> None:
        page.get(live_server.url + "/admin/login/?next=/admin/")
        page.find_element(By.NAME, "username").send_keys(username)
        page.find_element(By.NAME, "password").send_keys(password)
        screenshot("login")
        click_and_wait(page, page.find_element(By.CSS_SELECTOR, "#login-form [type=submit]"))
        page.find_element(By.ID, "user-tools")  # only a logged-in page has it

    return login
